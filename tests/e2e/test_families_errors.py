"""Bad family models are refused by `kernelmap compile` in one line, exit 1, nothing written.

Each case is a small synthetic GGUF (kernelmap.synth with a patched architecture table, the tokenizer copied
from a committed fixture): an architecture with no circuit (the message names the circuits that exist), a
tensor the circuit does not read, a tensor the circuit needs but the file lacks, a tensor type no kernel of
the policy serves (names the type and the tensor), and metadata keys that change the arithmetic but that
the circuit does not implement (names the key).
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from kernelmap.synth import model as synth_model
from kernelmap.synth import read_tokenizer, resolve_dims

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "families"


def _write(tmp_path: Path, monkeypatch, arch: str, *, extra_meta=(), extra_tensors=(), drop=(), arch_as=None,
           dims_over=None) -> Path:
    table = copy.deepcopy(synth_model.archs())
    spec = table[arch]
    spec["metadata"] += [dict(m) for m in extra_meta]
    spec["tensors"] = [t for t in spec["tensors"] if t["name"] not in drop] + [dict(t) for t in extra_tensors]
    if arch_as:
        table[arch_as] = spec
    monkeypatch.setattr(synth_model, "archs", lambda: table)
    _, dims = resolve_dims(arch, "tiny")
    dims.update(dims_over or {})
    tok = read_tokenizer(FIX / "models" / f"{arch}-Q8_0.gguf")
    return synth_model.write_model(tmp_path / "bad.gguf", arch_as or arch, dims, tok, seed=1)


def _compile_refused(tmp_path: Path, model: Path, *fragments: str) -> str:
    out = tmp_path / "bundle"
    proc = subprocess.run([sys.executable, "-m", "kernelmap", "compile", "-m", str(model), "-o", str(out), "-q",
                           "--batch", "8"], capture_output=True, text=True, timeout=600)
    err = proc.stderr.strip()
    assert proc.returncode == 1, (proc.returncode, err)
    lines = err.splitlines()  # one line, plus an optional "hint:" line (CONVENTIONS.md)
    assert "Traceback" not in err and err.startswith("error: "), err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].lstrip().startswith("hint: ")), err
    for frag in fragments:
        assert frag in err, (frag, err)
    assert not out.exists(), "nothing may be written"
    return err


def test_architecture_without_circuit_names_the_circuits_that_exist(tmp_path, monkeypatch):
    model = _write(tmp_path, monkeypatch, "llama", arch_as="mamba9")
    err = _compile_refused(tmp_path, model, "general.architecture", '"mamba9"')
    for arch in ("gemma3", "llama", "phi3", "qwen2", "qwen3", "qwen3moe"):
        assert arch in err


def test_tensor_the_circuit_does_not_read_is_named(tmp_path, monkeypatch):
    extra = {"name": "blk.{layer}.ffn_gate_inp.weight", "shape": ["d_model", "4"], "draw": "router"}
    model = _write(tmp_path, monkeypatch, "qwen2", extra_tensors=[extra])
    _compile_refused(tmp_path, model, "blk.0.ffn_gate_inp.weight", "not read by the qwen2 circuit")


def test_tensor_the_circuit_needs_but_the_file_lacks_is_named(tmp_path, monkeypatch):
    model = _write(tmp_path, monkeypatch, "qwen3", drop=["blk.{layer}.attn_k_norm.weight"])
    _compile_refused(tmp_path, model, "blk.0.attn_k_norm.weight", "missing")


def test_unsupported_tensor_type_names_the_type_and_the_tensor(tmp_path, monkeypatch):
    model = _write(tmp_path, monkeypatch, "qwen3moe")  # the F16 source: llama-cpu has no f16 expert linear
    _compile_refused(tmp_path, model, "blk.0.ffn_up_exps.weight", "unsupported weight type for moe_linear")


@pytest.mark.parametrize("arch,key,value,fragment", [
    ("llama", "{arch}.attn_logit_softcapping", 30.0, "changes the arithmetic"),
    ("qwen2", "{arch}.attention.sliding_window", 64, "changes the arithmetic"),
    ("qwen3", "{arch}.some_new_setting", 1, "unknown metadata key"),
])
def test_metadata_key_the_circuit_does_not_implement_is_named(tmp_path, monkeypatch, arch, key, value, fragment):
    meta = {"key": key, "type": "f32" if isinstance(value, float) else "u32", "value": "extra"}
    model = _write(tmp_path, monkeypatch, arch, extra_meta=[meta], dims_over={"extra": value})
    _compile_refused(tmp_path, model, key.replace("{arch}", arch), fragment)


def test_rope_scaling_type_the_circuit_does_not_implement_is_named(tmp_path, monkeypatch):
    meta = {"key": "{arch}.rope.scaling.type", "type": "str", "value": "scaling"}
    model = _write(tmp_path, monkeypatch, "llama", extra_meta=[meta], dims_over={"scaling": "yarn"})
    _compile_refused(tmp_path, model, "llama.rope.scaling.type", '"yarn"', "linear", "none")
