"""Long on-demand fuzz campaign for the GGUF reader: random mutations of the seed images, JSON summary.

Usage: .venv/bin/python benchmarks/fuzz_gguf.py [--iterations N] [--seconds S] [--seed K] [--out DIR]
Any exception other than GGUFError (or an input slower than --hang-seconds) is a finding: the input
is saved under --out and the script exits 1. It never runs in `make test`.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import random
import signal
import sys
import time
import traceback
from pathlib import Path

from kernelmap.errors import GGUFError
from kernelmap.gguf import open_gguf_bytes
from kernelmap.gguf.fuzz import exercise, mutate, random_ops, seed_images


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0 = no limit)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hang-seconds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("fuzz_findings"))
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    seeds = seed_images()
    corpus = list(seeds)
    reasons: collections.Counter[str] = collections.Counter()
    findings = 0
    opened = 0
    start = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    done = 0
    while done < args.iterations:
        if args.seconds and time.perf_counter() - start > args.seconds:
            break
        done += 1
        base = rng.choice(corpus)
        image = mutate(base, random_ops(rng, len(base)))
        signal.alarm(args.hang_seconds)
        try:
            ok = exercise(image)
            opened += ok
            if ok and len(corpus) < 256 and rng.random() < 0.05:
                corpus.append(image)  # valid mutants become new seeds (cheap structure awareness)
            if not ok:
                try:
                    open_gguf_bytes(image)
                except GGUFError as exc:
                    reasons[exc.message.split(" (")[0][:48]] += 1
        except Hang:
            findings += 1
            _save(args.out, image, "hang")
        except Exception:  # noqa: BLE001 - every non-GGUFError is a finding
            findings += 1
            _save(args.out, image, traceback.format_exc())
        finally:
            signal.alarm(0)
    elapsed = time.perf_counter() - start
    summary = {"iterations": done, "opened": opened, "findings": findings, "seconds": round(elapsed, 2),
               "per_second": round(done / elapsed, 1) if elapsed else None, "seed": args.seed,
               "top_rejections": reasons.most_common(12)}
    print(json.dumps(summary, indent=1))
    return 1 if findings else 0


def _save(out: Path, image: bytes, what: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(image).hexdigest()[:16]
    (out / f"{name}.gguf").write_bytes(image)
    (out / f"{name}.txt").write_text(what)
    print(f"finding: {out / name}.gguf", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
