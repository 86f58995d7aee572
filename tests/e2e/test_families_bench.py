"""benchmarks/families.py checks our tokens against llama.cpp run one token per llama_decode (n_ubatch 1).

llama.cpp's batched prefill is not the arithmetic the default policy reproduces: from 64 queries on its flash
attention takes a tiled multi-query path, so the full-size SmolLM2-135M Q4_K_M benchmark (128-token prompt)
reported `same_tokens: false` against it although our logits equal llama.cpp's one-token run bit for bit.
A fake peer echoes the request it got, so this needs neither the peer nor a model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import families  # noqa: E402


def _fake_peer(tmp_path: Path) -> Path:
    fake = tmp_path / "python"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nreq = json.loads(sys.stdin.read())\n"
                    "print(json.dumps([{'tokens': [req.get('n_ubatch', -1), len(req['tokens'])]}]))\n")
    fake.chmod(0o755)
    return fake


def test_families_bench_reference_tokens_come_from_one_token_micro_batches(tmp_path):
    got = families._reference_tokens("m.gguf", [5, 6, 7], 4, 1, _fake_peer(tmp_path))
    assert got == [1, 3], got


def test_families_bench_timed_peer_keeps_its_batched_prefill(tmp_path):
    got = families._peer("m.gguf", [5, 6, 7], 4, 1, True, _fake_peer(tmp_path))["tokens"]
    assert got == [-1, 3], json.dumps(got)
