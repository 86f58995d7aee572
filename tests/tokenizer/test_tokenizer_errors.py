"""Bad tokenizer metadata, one case each: the error class, the key it names, and a message fragment."""

from __future__ import annotations

import numpy as np
import pytest
from tok_helpers import P, bpe_metadata, spm_metadata

from kernelmap.errors import TokenizerError
from kernelmap.tokenizer import Tokenizer


def _spm(**changes):
    md = spm_metadata({"a": -1.0, "b": -2.0})
    for k, v in changes.items():
        if v is None:
            md.pop(P + k, None)
        else:
            md[P + k] = v
    return md


def _n() -> int:
    return len(spm_metadata({"a": -1.0, "b": -2.0})[P + "tokens"])


CASES = [
    ("missing_model", _spm(model=None), "tokenizer.ggml.model", "missing metadata key"),
    ("unknown_model", _spm(model="bert"), "tokenizer.ggml.model", "unsupported tokenizer model"),
    ("model_not_string", _spm(model=7), "tokenizer.ggml.model", "wrong value type"),
    ("missing_tokens", _spm(tokens=None), "tokenizer.ggml.tokens", "missing metadata key"),
    ("empty_tokens", _spm(tokens=[], scores=[], token_type=[]), "tokenizer.ggml.tokens", "empty vocabulary"),
    ("token_not_string", _spm(tokens=[1] * _n()), "tokenizer.ggml.tokens/0", "wrong element type"),
    ("token_too_long", _spm(tokens=spm_metadata({"a": -1.0, "x" * 2000: -2.0})[P + "tokens"]),
     f"tokenizer.ggml.tokens/{_n() - 1}", "token too long"),
    ("duplicate_token", _spm(tokens=spm_metadata({"a": -1.0, "b": -2.0})[P + "tokens"][:-1] + ["a"]),
     f"tokenizer.ggml.tokens/{_n() - 1}", "duplicate token"),
    ("scores_short", _spm(scores=[0.0] * 3), "tokenizer.ggml.scores", "array length differs"),
    ("scores_u8_type_confusion", _spm(scores=np.zeros(_n(), dtype=np.uint8)), "tokenizer.ggml.scores",
     "wrong array element type"),
    ("scores_strings", _spm(scores=["x"] * _n()), "tokenizer.ggml.scores", "not a flat numeric array"),
    ("types_float", _spm(token_type=[1.0] * _n()), "tokenizer.ggml.token_type", "wrong array element type"),
    ("bad_byte_token", _spm(tokens=["<unk>", "<s>", "</s>", "<0x-1>"] + spm_metadata({"a": -1.0, "b": -2.0})
                            [P + "tokens"][4:]), "tokenizer.ggml.tokens/3", "byte token is not spelled"),
    ("bos_out_of_range", _spm(bos_token_id=_n()), "tokenizer.ggml.bos_token_id", "token id out of range"),
    ("eos_negative", _spm(eos_token_id=-1), "tokenizer.ggml.eos_token_id", "token id out of range"),
    ("bos_not_int", _spm(bos_token_id="1"), "tokenizer.ggml.bos_token_id", "wrong value type"),
    ("add_bos_not_bool", _spm(add_bos_token="yes"), "tokenizer.ggml.add_bos_token", "wrong value type"),
    ("add_bos_without_bos", {P + "model": "llama", P + "tokens": ["a"], P + "add_bos_token": True},
     "tokenizer.ggml.add_bos_token", "no BOS token id"),
    ("gpt2_missing_merges", {**bpe_metadata([]), P + "merges": None}, "tokenizer.ggml.merges",
     "missing metadata key"),
    ("gpt2_unknown_pre", bpe_metadata([], pre="llama-3"), "tokenizer.ggml.pre", "unsupported pre-tokenizer"),
]


@pytest.mark.parametrize("name,md,pointer,fragment", CASES, ids=[c[0] for c in CASES])
def test_tokenizer_bad_metadata_names_key(name, md, pointer, fragment):
    md = {k: v for k, v in md.items() if v is not None}
    with pytest.raises(TokenizerError) as exc:
        Tokenizer.from_metadata(md, source="bad.gguf")
    assert exc.value.pointer == pointer, str(exc.value)
    assert fragment in exc.value.message, str(exc.value)
    assert str(exc.value).startswith(f"bad.gguf: {pointer}: ")


def test_tokenizer_malformed_merge_fails_at_first_use_naming_index():
    tok = Tokenizer.from_metadata(bpe_metadata(["h e"], pre="qwen2") | {P + "merges": ["h e", "nospace"]})
    with pytest.raises(TokenizerError) as exc:
        tok.encode("he")
    assert exc.value.pointer == "tokenizer.ggml.merges/1"


def test_tokenizer_missing_byte_fallback_token_is_an_error_not_a_drop():
    md = {P + "model": "llama", P + "tokens": ["<unk>", "<s>", "</s>", "a"], P + "token_type": [2, 3, 3, 1],
          P + "add_space_prefix": False}
    tok = Tokenizer.from_metadata(md)
    with pytest.raises(TokenizerError, match="no byte-fallback token for byte 0xC3"):
        tok.encode("\u00e9")


def test_tokenizer_encode_non_text_and_decode_bad_id_are_errors():
    tok = Tokenizer.from_metadata(_spm())
    with pytest.raises(TokenizerError):
        tok.encode(b"bytes")
    with pytest.raises(TokenizerError, match="out of range"):
        tok.decode([tok.n_vocab])


def test_tokenizer_absent_ids_use_validated_defaults():
    tok = Tokenizer.from_metadata(_spm(bos_token_id=None, eos_token_id=None))
    assert (tok.bos_id, tok.eos_id) == (1, 2)
    tiny = Tokenizer.from_metadata({P + "model": "llama", P + "tokens": ["a"], P + "add_bos_token": False})
    assert tiny.bos_id is None and tiny.eos_id is None
