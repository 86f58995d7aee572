"""Metadata that is hostile or contradicts the tensors is refused at compile time, naming the file and the key.

Each case rewrites one metadata value (or one tensor's type) of a tiny synthetic gemma3 model and asserts the
exact one-line message of hydrate.read_config, the first thing compile does with a model: a layer count far
beyond the tensor table (refused before any loop over layers), a key of the wrong GGUF value type, a float
that is not finite in f32 or not positive, a dimension or a token list that contradicts the tensor shapes,
a zero head count or head size (not a modulo by zero blamed on the circuit), and a read tensor of a GGML
type id kernelmap does not know.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from synth_model import write_synth_model

from kernelmap.circuits.hydrate import read_config
from kernelmap.circuits.loader import circuit_for
from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import GGUFError, KernelmapError, ModelError
from kernelmap.gguf import open_gguf
from kernelmap.gguf.types import ValueType
from kernelmap.gguf.writer import KV, RawTensor, build_gguf

U32, I32, F32, F64, STR = ValueType.UINT32, ValueType.INT32, ValueType.FLOAT32, ValueType.FLOAT64, ValueType.STRING
ARRAY = ValueType.ARRAY
UNKNOWN_TYPE = 99  # not a GGML type id


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The unmodified synthetic model: 2 layers, d 64, 2 heads of 32, 1 KV head, ffn 128, 320 tokens."""
    return write_synth_model(tmp_path_factory.mktemp("meta") / "base.gguf")


def _mutant(base: Path, out: Path, kv: dict[str, tuple[ValueType, object]] | None = None,
            arrays: dict[str, list] | None = None, tensor_types: dict[str, int] | None = None) -> Path:
    """Rewrite `base` with metadata values replaced (kv: key -> (type, value)), arrays replaced (same element
    type) and tensor type ids replaced (the data bytes stay as they are)."""
    kv, arrays, tensor_types = kv or {}, arrays or {}, tensor_types or {}
    f = open_gguf(base)
    kvs = []
    for key in f.metadata:
        types = f.metadata_types(key)
        if key in kv:
            kvs.append(KV(key, *kv[key]))
        elif types[0] == ARRAY:
            value = arrays.get(key, list(f.metadata_array(key)))
            kvs.append(KV(key, ARRAY, value, types[1]))
        else:
            kvs.append(KV(key, types[0], f.metadata[key]))
    kvs += [KV(key, *tv) for key, tv in kv.items() if key not in f.metadata]
    tensors = [RawTensor(info.name, info.shape, tensor_types.get(info.name, info.ggml_type),
                         bytes(f.tensor_data(info.name)))
               for info in sorted(f.tensors.values(), key=lambda t: t.index)]
    out.write_bytes(build_gguf(kvs, tensors))
    return out


def _refusal(path: Path) -> KernelmapError:
    """The error compile's first stage (read_config) raises for the model at `path`."""
    f = open_gguf(path)
    circuit = circuit_for(f.metadata["general.architecture"])
    with pytest.raises(KernelmapError) as info:
        read_config(circuit, f.metadata, f.tensors, source=str(path))
    return info.value


INT_TYPES = "an integer type (uint8, int8, uint16, int16, uint32, int32, uint64, int64)"
NOT_FINITE = "expected a finite value of magnitude <= 3.40282e+38"

# (case id, metadata overrides, the message after "<file>: ")
KV_CASES = [
    # A: a layer count the tensor table cannot hold, refused before any per-layer loop
    ("block_count_u32_max", {"gemma3.block_count": (U32, 2**32 - 1)},
     "gemma3.block_count: layer count contradicts the tensor table "
     "(found 4294967295; expected the number of layers in the tensor table, 2)"),
    ("block_count_2_pow_63", {"gemma3.block_count": (ValueType.UINT64, 2**63)},
     "gemma3.block_count: layer count contradicts the tensor table "
     "(found 9223372036854775808; expected the number of layers in the tensor table, 2)"),
    ("block_count_one_more", {"gemma3.block_count": (U32, 3)},
     "gemma3.block_count: layer count contradicts the tensor table "
     "(found 3; expected the number of layers in the tensor table, 2)"),
    # B: accepted before with wrong output
    ("embedding_length_0", {"gemma3.embedding_length": (U32, 0)},
     "gemma3.embedding_length: value is out of range (found 0; expected >= 1)"),
    ("embedding_length_65", {"gemma3.embedding_length": (U32, 65)},
     "gemma3.embedding_length: contradicts the tensor shapes: token_embd.weight has d_model = 64 "
     "(found 65; expected 64)"),
    ("feed_forward_length_64", {"gemma3.feed_forward_length": (U32, 64)},
     "gemma3.feed_forward_length: contradicts the tensor shapes: blk.0.ffn_gate.weight has ffn_dim = 128 "
     "(found 64; expected 128)"),
    ("rms_epsilon_negative", {"gemma3.attention.layer_norm_rms_epsilon": (F32, -1.0)},
     "gemma3.attention.layer_norm_rms_epsilon: value is out of range (found -1.0; expected > 0)"),
    ("rope_freq_base_0", {"gemma3.rope.freq_base": (F32, 0.0)},
     "gemma3.rope.freq_base: value is out of range (found 0.0; expected > 0)"),
    ("rope_scaling_factor_0", {"gemma3.rope.scaling.factor": (F32, 0.0)},
     "gemma3.rope.scaling.factor: value is out of range (found 0.0; expected > 0)"),
    ("block_count_string", {"gemma3.block_count": (STR, "2")},
     f'gemma3.block_count: metadata value has the wrong type (found "string"; expected {INT_TYPES})'),
    ("block_count_float", {"gemma3.block_count": (F32, 2.0)},
     f'gemma3.block_count: metadata value has the wrong type (found "float32"; expected {INT_TYPES})'),
    ("rms_epsilon_string_nan", {"gemma3.attention.layer_norm_rms_epsilon": (STR, "nan")},
     'gemma3.attention.layer_norm_rms_epsilon: metadata value has the wrong type '
     '(found "string"; expected float32 or float64)'),
    # C: messages that named no file or key, or blamed the circuit
    ("rms_epsilon_nan", {"gemma3.attention.layer_norm_rms_epsilon": (F32, float("nan"))},
     f"gemma3.attention.layer_norm_rms_epsilon: value is not finite in float32 (found nan; {NOT_FINITE})"),
    ("rms_epsilon_f64_1e300", {"gemma3.attention.layer_norm_rms_epsilon": (F64, 1e300)},
     f"gemma3.attention.layer_norm_rms_epsilon: value is not finite in float32 (found 1e+300; {NOT_FINITE})"),
    ("head_count_kv_0", {"gemma3.attention.head_count_kv": (U32, 0)},
     "gemma3.attention.head_count_kv: value is out of range (found 0; expected >= 1)"),
    ("head_count_kv_2", {"gemma3.attention.head_count_kv": (U32, 2)},
     "gemma3.attention.head_count_kv, gemma3.attention.key_length: contradicts the tensor shapes: "
     "blk.0.attn_k.weight has n_kv_heads * head_dim = 32 (found 64; expected 32)"),
    ("key_length_0", {"gemma3.attention.key_length": (U32, 0), "gemma3.attention.value_length": (U32, 0)},
     "gemma3.attention.key_length: value is out of range (found 0; expected >= 1)"),
    ("context_length_0", {"gemma3.context_length": (U32, 0)},
     "gemma3.context_length: value is out of range (found 0; expected >= 1)"),
    ("sliding_window_pattern_negative", {"gemma3.attention.sliding_window_pattern": (I32, -1)},
     "gemma3.attention.sliding_window_pattern: value is out of range (found -1; expected >= 1)"),
    # a window of 0 keys: the kernels read window 0 as full causal attention, which this file does not mean
    ("sliding_window_0", {"gemma3.attention.sliding_window": (U32, 0)},
     "gemma3.attention.sliding_window: value is out of range (found 0; expected >= 1)"),
]


@pytest.mark.parametrize("case_id,kv,message", KV_CASES, ids=[c[0] for c in KV_CASES])
def test_read_config_refuses_contradicting_metadata_naming_file_and_key(base, tmp_path, case_id, kv, message):
    path = _mutant(base, tmp_path / f"{case_id}.gguf", kv=kv)
    err = _refusal(path)
    assert isinstance(err, ModelError)
    assert err.line() == f"{path}: {message}"


@pytest.mark.parametrize("case_id,count", [("tokens_longer", 420), ("tokens_shorter", 300)])
def test_read_config_refuses_token_list_other_than_embedding_rows(base, tmp_path, case_id, count):
    f = open_gguf(base)
    tokens = list(f.metadata_array("tokenizer.ggml.tokens"))
    scores = list(f.metadata_array("tokenizer.ggml.scores"))
    types = list(f.metadata_array("tokenizer.ggml.token_type"))
    extra = count - len(tokens)
    arrays = {"tokenizer.ggml.tokens": tokens[:count] + [f"zz{i}" for i in range(extra)],
              "tokenizer.ggml.scores": scores[:count] + [0.0] * extra,
              "tokenizer.ggml.token_type": types[:count] + [1] * extra}
    path = _mutant(base, tmp_path / f"{case_id}.gguf", arrays=arrays)
    err = _refusal(path)
    assert err.line() == (f"{path}: tokenizer.ggml.tokens: contradicts the tensor shapes: token_embd.weight has "
                          f"token_count = 320 (found {count}; expected 320)")


def test_read_config_refuses_read_tensor_of_unknown_ggml_type_by_tensor(base, tmp_path):
    path = _mutant(base, tmp_path / "unknown_type.gguf", tensor_types={"blk.0.attn_norm.weight": UNKNOWN_TYPE})
    err = _refusal(path)
    assert isinstance(err, GGUFError)
    assert err.line().startswith(f"{path}: tensors/blk.0.attn_norm.weight/type: tensor 'blk.0.attn_norm.weight' "
                                 f"has unsupported ggml type id 99 (found 99; expected one of f32, f16, ")


def test_read_config_blames_the_model_for_a_check_that_fails_on_its_values(base, tmp_path):
    """A circuit expression that divides by a value from the file blames the file and its keys, not the circuit."""
    circuit = circuit_for("gemma3")
    data = {**circuit.data, "checks": [{"expr": "d_model % (n_heads - n_kv_heads - 1) == 0",
                                        "message": "test check"}]}
    f = open_gguf(base)
    with pytest.raises(ModelError) as info:
        read_config(replace(circuit, data=data), f.metadata, f.tensors, source=str(base))
    assert info.value.line() == (
        f"{base}: gemma3.attention.head_count, gemma3.attention.head_count_kv, gemma3.embedding_length: "
        "circuits/gemma3.json /checks/0: expression cannot be evaluated: integer modulo by zero with this "
        'model\'s values (found "d_model % (n_heads - n_kv_heads - 1) == 0")')


def test_cli_refuses_huge_block_count_at_once_in_one_line(base, tmp_path):
    path = _mutant(base, tmp_path / "huge.gguf", kv={"gemma3.block_count": (U32, 2**32 - 1)})
    res = subprocess.run([sys.executable, "-m", "kernelmap", "compile", "-m", str(path), "-o", str(tmp_path / "b"),
                          "-q"], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip() == (f"error: {path}: gemma3.block_count: layer count contradicts the tensor table "
                                  "(found 4294967295; expected the number of layers in the tensor table, 2)")


def test_unmodified_and_rewritten_models_compile(base, tmp_path):
    """The rewrite itself changes nothing: the base model and its unmodified rewrite both compile."""
    same = _mutant(base, tmp_path / "same.gguf")
    for path in (base, same):
        f = open_gguf(path)
        cfg = read_config(circuit_for("gemma3"), f.metadata, f.tensors, source=str(path))
        assert (cfg["n_layers"], cfg["d_model"], cfg["token_count"]) == (2, 64, 320)
    compiled = compile_model(same, CompileOptions(max_rows=8))
    assert compiled is not None
