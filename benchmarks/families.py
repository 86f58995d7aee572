"""Family benchmark: full-size synthetic models of real shapes, our tokens/s against llama.cpp's in the same run.

For each dims (default SmolLM2-135M, Qwen2.5-0.5B, Qwen3-0.6B, the scaled Qwen3-30B-A3B) and preset (default
Q4_K_M and Q8_0): writes the synthetic F16 model once (`kernelmap synth`, cached in --work), quantizes it with
llama.cpp's quantizer, then for each thread count alternates our run and the peer's (flash attention on, the
arithmetic our default policy follows) `--repeats` times on the same random prompt ids and prints the medians
and ratios (ours / llama.cpp). Needs the peer (`.venv-peer`) and llama.cpp's vocab files (--vocab-dir).
Never used as a test: numbers only, and only meaningful on a quiet machine.

`same tokens` compares our greedy tokens with llama.cpp's run one token per llama_decode (n_ubatch 1), the
arithmetic the default policy reproduces bit for bit. The timed peer runs prefill as one batch, which is its
fast path but not the same arithmetic: from 64 queries on (GGML_FA_TILE_Q), its flash attention takes a tiled
multi-query path whose sums differ from the one-query path in the last bits, so its greedy tokens may part
from the one-token run after a near-tie (SmolLM2-135M Q4_K_M, 128-token prompt: at the 23rd generated token).
`batched peer same` says whether the timed batched run happened to produce the same tokens too.

    .venv/bin/python benchmarks/families.py --vocab-dir <llama.cpp>/models --threads 1,2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import PEER_PY, _ours, _peer  # noqa: E402  (the same timing loops as the Gemma benchmark)

DIMS = ("smollm2-135m", "qwen2.5-0.5b", "qwen3-0.6b", "qwen3-30b-a3b-scaled")
PRESETS = ("Q4_K_M", "Q8_0")


def _model(work: Path, dims: str, preset: str, vocab_dir: str) -> Path:
    from kernelmap.synth import peer_python, quantize, read_tokenizer, resolve_dims, vocab_path, write_model

    arch, spec = resolve_dims(None, dims)
    src = work / f"{dims}-F16.gguf"
    if not src.exists():
        tok = read_tokenizer(vocab_path(spec["vocab_name"], vocab_dir))
        write_model(src, arch, spec, tok, seed=0, name=f"synthetic {dims}")
    out = work / f"{dims}-{preset}.gguf"
    if not out.exists():
        quantize(src, out, preset, python=peer_python(str(PEER_PY)), threads=2)
    return out


def _reference_tokens(gguf: str, ids: list[int], n_decode: int, threads: int, peer_py: Path = PEER_PY) -> list[int]:
    """llama.cpp's greedy tokens at the arithmetic our default policy follows: flash attention, one token per decode."""
    return _peer(gguf, ids, n_decode, threads, True, peer_py, ubatch=1)["tokens"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab-dir", required=True, help="llama.cpp's models/ folder (ggml-vocab-*.gguf)")
    ap.add_argument("--dims", default=",".join(DIMS))
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=str(Path.home() / ".cache" / "kernelmap" / "synth-bench"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not PEER_PY.exists():
        raise SystemExit("error: .venv-peer is missing: run `make parity` (builds llama-cpp-python) first")
    from kernelmap.compiler import CompileOptions, compile_model
    from kernelmap.runtime.model import Model

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for dims in args.dims.split(","):
        for preset in args.presets.split(","):
            gguf = _model(work, dims, preset, args.vocab_dir)
            compiled = compile_model(gguf, CompileOptions())
            n_vocab = int(compiled.info["config"]["vocab"])
            ids = [int(t) for t in np.random.default_rng(0).integers(300, min(n_vocab, 30000), args.prompt_tokens)]
            for threads in [int(t) for t in args.threads.split(",")]:
                model = Model(compiled, n_ctx=args.prompt_tokens + args.decode_tokens + 16, threads=threads)
                ours, peer = [], []
                reference = _reference_tokens(str(gguf), ids, args.decode_tokens, threads)
                same, batched_same = True, True
                for _ in range(args.repeats):
                    o = _ours(model, ids, args.decode_tokens)
                    p = _peer(str(gguf), ids, args.decode_tokens, threads, True)
                    same &= o["tokens"] == reference
                    batched_same &= p["tokens"] == reference
                    ours.append(o)
                    peer.append(p)
                model.close()
                row = {"dims": dims, "preset": preset, "threads": threads, "same_tokens": same,
                       "batched_peer_same": batched_same}
                for key in ("prefill_tps", "decode_tps"):
                    a = statistics.median(r[key] for r in ours)
                    b = statistics.median(r[key] for r in peer)
                    row[f"ours_{key}"], row[f"llama_{key}"] = round(a, 1), round(b, 1)
                    row[f"ratio_{key.split('_')[0]}"] = round(a / b, 2) if b else None
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    if args.json:
        print(json.dumps({"prompt_tokens": args.prompt_tokens, "decode_tokens": args.decode_tokens,
                          "repeats": args.repeats, "results": rows}))
        return
    print("| dims | preset | threads | prefill ours | llama.cpp | ratio | decode ours | llama.cpp | ratio | same tokens "
          "| batched peer same |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dims']} | {r['preset']} | {r['threads']} | {r['ours_prefill_tps']} | {r['llama_prefill_tps']} | "
              f"{r['ratio_prefill']} | {r['ours_decode_tps']} | {r['llama_decode_tps']} | {r['ratio_decode']} | "
              f"{r['same_tokens']} | {r['batched_peer_same']} |")


if __name__ == "__main__":
    main()
