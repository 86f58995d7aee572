"""End-to-end benchmark: our prefill and decode tokens/s against llama.cpp's, measured in the same run.

For each thread count, alternates our run and the peer's run `--repeats` times on the same prompt
token ids (a 256-token prompt, 128 greedy decode steps by default) and prints the medians and the
ratios (ours / llama.cpp) as a table and, with --json, one JSON object. The peer runs in the peer venv
(`make parity` builds it) through benchmarks/peer_llama.py. Never used as a test: numbers only.

    .venv/bin/python benchmarks/e2e.py --threads 1,2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER_PY = ROOT / ".venv-peer" / "bin" / "python"

TEXT = ("The history of computing is a story of abstractions built one atop another. Early machines were "
        "programmed by rewiring panels; later, stored programs let the same hardware run many tasks. "
        "Assemblers named instructions, compilers translated structured languages, and operating systems "
        "shared processors among users. Each layer hid details below it while exposing new power above. ")


def _ours(model, prompt: list[int], n_decode: int) -> dict:
    model.reset()
    t0 = time.perf_counter()
    logits = model.prefill(prompt)
    t1 = time.perf_counter()
    toks = []
    for _ in range(n_decode):
        tok = int(logits.argmax())
        toks.append(tok)
        logits = model.decode(tok)
    t2 = time.perf_counter()
    return {"prefill_tps": len(prompt) / (t1 - t0), "decode_tps": n_decode / (t2 - t1), "tokens": toks}


def _peer(gguf: str, prompt: list[int], n_decode: int, threads: int, flash_attn: bool) -> dict:
    req = {"model": gguf, "tokens": prompt, "n_decode": n_decode, "threads": threads,
           "n_ctx": len(prompt) + n_decode + 16, "flash_attn": flash_attn, "repeats": 1}
    proc = subprocess.run([str(PEER_PY), "-P", str(ROOT / "benchmarks" / "peer_llama.py")], input=json.dumps(req),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"error: peer run failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None, help="GGUF file (default: the default model package)")
    ap.add_argument("--threads", default="2", help="comma list, e.g. 1,2")
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--flash-attn", action="store_true", help="run the peer with flash attention")
    ap.add_argument("--fusion-compare", action="store_true",
                    help="also time our program built without fusion rules, in the same run, and print the ratio")
    ap.add_argument("--policy", default=None, help="numerics policy to compile ours with (default: the compiler's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not PEER_PY.exists():
        raise SystemExit("error: .venv-peer is missing: run `make parity` (builds llama-cpp-python) first")
    from kernelmap.compiler import CompileOptions
    from kernelmap.runtime import default_model_path, load

    gguf = str(Path(args.model) if args.model else default_model_path())
    results = []
    for threads in [int(t) for t in args.threads.split(",")]:
        base = CompileOptions() if args.policy is None else CompileOptions(policy=args.policy)
        model = load(gguf, threads=threads, n_ctx=args.prompt_tokens + args.decode_tokens + 16, options=base)
        ids = model.tokenizer.encode(TEXT * 20)[: args.prompt_tokens]
        unfused = None
        if args.fusion_compare:
            unfused = load(gguf, threads=threads, n_ctx=args.prompt_tokens + args.decode_tokens + 16,
                           options=replace(base, fusion=False))
        ours, peer, plain = [], [], []
        same = True
        for _ in range(args.repeats):
            o = _ours(model, ids, args.decode_tokens)
            p = _peer(gguf, ids, args.decode_tokens, threads, args.flash_attn)
            if unfused is not None:
                plain.append(_ours(unfused, ids, args.decode_tokens))
            same &= o["tokens"] == p["tokens"]
            ours.append(o)
            peer.append(p)
        model.close()
        row = {"threads": threads}
        if unfused is not None:
            unfused.close()
            for key in ("prefill_tps", "decode_tps"):
                a = statistics.median(r[key] for r in ours)
                b = statistics.median(r[key] for r in plain)
                row[f"unfused_{key}"] = round(b, 2)
                row[f"fusion_ratio_{key.split('_')[0]}"] = round(a / b, 3) if b else None
        for key in ("prefill_tps", "decode_tps"):
            a = statistics.median(r[key] for r in ours)
            b = statistics.median(r[key] for r in peer)
            row[f"ours_{key}"] = round(a, 2)
            row[f"llama_{key}"] = round(b, 2)
            row[f"ratio_{key.split('_')[0]}"] = round(a / b, 3) if b else None
        row["greedy_tokens_identical"] = same
        row["peer_version"] = peer[0]["version"]
        results.append(row)
    out = {"prompt_tokens": args.prompt_tokens, "decode_tokens": args.decode_tokens, "repeats": args.repeats,
           "policy": base.policy, "peer_flash_attn": args.flash_attn, "results": results}
    if args.json:
        print(json.dumps(out))
        return
    print(f"{'threads':>7} {'prefill ours':>13} {'llama.cpp':>10} {'ratio':>6} | {'decode ours':>12} "
          f"{'llama.cpp':>10} {'ratio':>6} | same tokens")
    for r in results:
        print(f"{r['threads']:>7} {r['ours_prefill_tps']:>13.1f} {r['llama_prefill_tps']:>10.1f} "
              f"{r['ratio_prefill']:>6.2f} | {r['ours_decode_tps']:>12.1f} {r['llama_decode_tps']:>10.1f} "
              f"{r['ratio_decode']:>6.2f} | {r['greedy_tokens_identical']}")
    for r in results:
        if "fusion_ratio_decode" in r:
            print(f"fusion on/off (threads {r['threads']}): prefill {r['fusion_ratio_prefill']:.2f}x, "
                  f"decode {r['fusion_ratio_decode']:.2f}x")
    print(json.dumps(out), file=sys.stderr)


if __name__ == "__main__":
    main()
