"""Synthetic models (kernelmap synth): deterministic bytes, the fixtures' F16 sources re-made exactly, tokenizer
truncation that keeps control tokens and renumbers ids, dims lookups, and one-line CLI errors."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelmap.errors import ModelError
from kernelmap.gguf.reader import open_gguf
from kernelmap.synth import named_dims, read_tokenizer, resolve_dims, write_model

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "families"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "phi3", "qwen3moe"])
def test_synth_rewrites_the_fixture_f16_source_byte_for_byte(tmp_path, arch):
    manifest = json.loads((FIX / "manifest.json").read_text())
    entry = manifest["models"][arch]
    name, dims = resolve_dims(arch, "tiny")
    tok = read_tokenizer(FIX / "models" / f"{arch}-Q8_0.gguf", keep=dims["vocab_keep"])
    path = write_model(tmp_path / "m.gguf", name, dims, tok, seed=entry["seed"], name="synthetic tiny")
    assert _sha(path) == entry["presets"]["F16"]["sha256"]


def test_synth_seed_changes_weights_not_layout(tmp_path):
    name, dims = resolve_dims("qwen2", "tiny")
    tok = read_tokenizer(FIX / "models" / "qwen2-Q8_0.gguf")
    a = write_model(tmp_path / "a.gguf", name, dims, tok, seed=1)
    b = write_model(tmp_path / "b.gguf", name, dims, tok, seed=2)
    ga, gb = open_gguf(a), open_gguf(b)
    assert {k: v.shape for k, v in ga.tensors.items()} == {k: v.shape for k, v in gb.tensors.items()}
    assert bytes(ga.tensor_data("blk.0.attn_q.weight")) != bytes(gb.tensor_data("blk.0.attn_q.weight"))
    norm = ga.tensor_array("blk.0.attn_norm.weight")
    assert 0.5 < float(norm.mean()) < 1.5  # norm weights near 1


def test_truncated_tokenizer_keeps_control_tokens_and_renumbers_ids():
    tok = read_tokenizer(FIX / "models" / "qwen2-Q8_0.gguf")
    rows = {k: v for k, v, *_ in tok.rows}
    assert tok.n_vocab == len(rows["tokenizer.ggml.tokens"]) == 323
    assert rows["tokenizer.ggml.tokens"][rows["tokenizer.ggml.eos_token_id"]] == "<|endoftext|>"
    kept = set(rows["tokenizer.ggml.tokens"])
    assert all(a in kept and b in kept and a + b in kept for a, b in (m.split(" ") for m in rows["tokenizer.ggml.merges"]))
    assert rows["tokenizer.ggml.pre"] == "qwen2"


def test_named_dims_carry_their_architecture_and_vocabulary():
    assert {resolve_dims(None, d)[0] for d in named_dims()} == {"llama", "qwen2", "qwen3", "phi3", "qwen3moe"}
    arch, dims = resolve_dims(None, "qwen3-30b-a3b-scaled")
    assert arch == "qwen3moe" and dims["n_experts_used"] == 8 and dims["vocab_name"] == "qwen2"
    with pytest.raises(ModelError, match="another architecture"):
        resolve_dims("llama", "qwen2.5-0.5b")
    with pytest.raises(ModelError, match="needs --arch"):
        resolve_dims(None, "tiny")


@pytest.mark.parametrize("args,fragment", [
    (["--dims", "qwen9-1b"], "unknown dims"),
    (["--arch", "qwen2", "--dims", "tiny", "--preset", "Q3_K_S"], "unknown preset"),
    (["--arch", "qwen2", "--dims", "tiny", "--vocab-dir", "/nonexistent"], "vocabulary file not found"),
])
def test_synth_cli_bad_input_is_one_line_exit_1_nothing_written(tmp_path, args, fragment):
    out = tmp_path / "m.gguf"
    proc = subprocess.run([sys.executable, "-m", "kernelmap", "synth", *args, "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and fragment in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


def test_synth_cli_writes_a_tiny_model_from_a_fixture_tokenizer(tmp_path):
    out = tmp_path / "m.gguf"
    proc = subprocess.run([sys.executable, "-m", "kernelmap", "synth", "--arch", "phi3", "--dims", "tiny", "-o", str(out),
                           "--vocab", str(FIX / "models" / "phi3-Q8_0.gguf"), "--seed", "14"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(out)]
    manifest = json.loads((FIX / "manifest.json").read_text())
    assert _sha(out) == manifest["models"]["phi3"]["presets"]["F16"]["sha256"]
