"""Interleaved A/B timing of a whole model: a git revision's compiler and kernels against the working tree's.

A change that moves one op by 5-10% disappears between two runs of `benchmarks/e2e.py` on a shared machine (its
read bandwidth moved 40 -> 80 GB/s within minutes while this was written). This tool compiles the model twice
into standalone bundles (`kernelmap compile --profile`: A with the package and kernel sources of --rev, extracted
by `git archive`; B with the working tree), builds both with `make`, loads both libraries into this one process
and times them in alternating rounds (A then B on even rounds, B then A on odd ones): each round a prefill of
--pos tokens, then --steps decode steps, each step timed. It prints each side's median step, the median and
quartiles of the per-round ratio B / A (a drift of the host hits both sides of a round alike), the prefill
medians, and, from the per-op timers of the profiling builds, each op kind's mean time per step on both sides
(layers summed: "ffn_up" is every layer's ffn_up). Both sides must produce the same logits at every step, or
it says so and exits 1 (a speed change must not change bits).

    .venv/bin/python benchmarks/ab_model.py --rev HEAD~1 --threads 2          # the last commit's effect
    .venv/bin/python benchmarks/ab_model.py --rev main --threads 1 --rounds 21 --steps 16

Written by hand: a few ctypes calls of the model's own C API (km_model.h); no benchmarking library loads two
builds of one C program into a process. A development tool, not a speed claim (benchmarks/e2e.py measures
llama.cpp in the same run).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VOCAB_PROBE = 1000  # first prompt token id (the prompt is VOCAB_PROBE, VOCAB_PROBE + 1, ...)


def _extract(rev: str, dest: Path) -> Path:
    """The tree of `rev` under dest (git archive), returned as the directory holding its src/."""
    with tempfile.TemporaryFile() as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"], stdout=fh, check=True)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(dest, filter="data")
    return dest


def _bundle(src_root: Path, out: Path, model: str | None, policy: str | None) -> Path:
    """Compile a profiling bundle with the package under src_root/src and build it; return its library."""
    cmd = [sys.executable, "-m", "kernelmap", "compile", "--profile", "-q", "-o", str(out)]
    if model:
        cmd += ["-m", model]
    if policy:
        cmd += ["--policy", policy]
    env = dict(os.environ, PYTHONPATH=str(src_root / "src"))
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    mk = out / "Makefile"
    rule = "obj/model.o: model.c | obj\n\t$(CC) $(CFLAGS) -c"
    text = mk.read_text()
    if "-DKM_PROFILE" not in text and rule in text:  # revisions whose bundle writer dropped --profile
        mk.write_text(text.replace(rule, rule[: -len(" -c")] + " -DKM_PROFILE -c"))
    subprocess.run(["make", "-s", "-C", str(out), f"-j{os.cpu_count() or 2}"], check=True)
    return out / "libkmmodel.so"


class _Side:
    """One loaded bundle: its library, model handle and decode op labels."""

    def __init__(self, lib: Path, n_ctx: int, threads: int) -> None:
        d = lib.parent
        self.lib = ctypes.CDLL(str(lib))
        L = self.lib
        L.km_model_create.restype = ctypes.c_void_p
        L.km_model_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int,
                                      ctypes.c_char_p, ctypes.c_size_t]
        L.km_model_prefill.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int64,
                                       ctypes.c_int64]
        L.km_model_decode.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64]
        L.km_model_logits.restype = ctypes.POINTER(ctypes.c_float)
        L.km_model_logits.argtypes = [ctypes.c_void_p]
        L.km_model_n_vocab.restype = ctypes.c_int64
        L.km_model_profile.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_int]
        err = ctypes.create_string_buffer(512)
        gguf = d / "model.gguf"
        self.handle = L.km_model_create(str(d / "weights.bin").encode(), str(gguf).encode() if gguf.exists() else None,
                                        n_ctx, threads, err, len(err))
        if not self.handle:
            raise SystemExit(f"error: {lib}: cannot create the model: {err.value.decode(errors='replace')}")
        self.n_vocab = int(L.km_model_n_vocab())
        self.ops = json.loads((d / "build.json").read_text())["ops"]["decode"]

    def logits(self) -> bytes:
        return ctypes.string_at(self.lib.km_model_logits(self.handle), self.n_vocab * 4)

    def profile(self) -> list[float]:
        buf = (ctypes.c_double * len(self.ops))()
        self.lib.km_model_profile(self.handle, 1, buf, len(self.ops))
        return list(buf)


def _round(side: _Side, prompt: list[int], steps: int) -> tuple[float, float, list[bytes]]:
    """Prefill seconds, median decode-step seconds, and the logits of every step."""
    arr = (ctypes.c_int32 * len(prompt))(*prompt)
    t0 = time.perf_counter()
    if side.lib.km_model_prefill(side.handle, arr, len(prompt), 0) != 0:
        raise SystemExit("error: prefill failed")
    pre = time.perf_counter() - t0
    times, outs = [], []
    for s in range(steps):
        t0 = time.perf_counter()
        if side.lib.km_model_decode(side.handle, (VOCAB_PROBE + s % 7) % side.n_vocab, len(prompt) + s) != 0:
            raise SystemExit("error: decode failed")
        times.append(time.perf_counter() - t0)
        outs.append(side.logits())
    return pre, statistics.median(times), outs


def _kinds(labels: list[str], secs: list[float], per: int) -> dict[str, float]:
    out: dict[str, float] = collections.defaultdict(float)
    for label, s in zip(labels, secs, strict=True):
        out[re.sub(r"blk\.\d+\.", "", label)] += s / per
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: benchmarks/ab_model.py --rev HEAD~1 --threads 2")
    ap.add_argument("--rev", default="HEAD", help="git revision of build A (default HEAD); B is the working tree")
    ap.add_argument("-m", "--model", default=None, help="GGUF file (default: the default model package)")
    ap.add_argument("--policy", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--steps", type=int, default=16, help="decode steps per round")
    ap.add_argument("--pos", type=int, default=384, help="prompt tokens before the decode steps")
    ap.add_argument("--top", type=int, default=12, help="op kinds to print")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1 or args.pos < 1 or args.threads < 1:
        raise SystemExit("error: --rounds, --steps, --pos and --threads must be at least 1")
    with tempfile.TemporaryDirectory(prefix="km-abmodel-") as tmp:
        t = Path(tmp)
        print(f"building A ({args.rev}) and B (working tree) ...", file=sys.stderr)
        lib_a = _bundle(_extract(args.rev, t / "rev"), t / "a", args.model, args.policy)
        lib_b = _bundle(ROOT, t / "b", args.model, args.policy)
        n_ctx = args.pos + args.steps + 8
        sides = [_Side(lib_a, n_ctx, args.threads), _Side(lib_b, n_ctx, args.threads)]
        prompt = [(VOCAB_PROBE + i) % sides[0].n_vocab for i in range(args.pos)]
        step = [[], []]
        pre = [[], []]
        ref: list[bytes] | None = None
        for r in range(args.rounds):
            for i in (0, 1) if r % 2 == 0 else (1, 0):
                p, s, outs = _round(sides[i], prompt, args.steps)
                pre[i].append(p)
                step[i].append(s)
                if ref is None:
                    ref = outs
                elif outs != ref:
                    raise SystemExit(f"error: {'AB'[i]}'s logits differ from the first round's (round {r})")
        ratios = sorted(b / a for a, b in zip(step[0], step[1], strict=True))
        q = len(ratios) // 4
        print(f"threads {args.threads}, {args.rounds} rounds of a {args.pos}-token prefill and {args.steps} decode steps")
        for i, name in enumerate(("A", "B")):
            print(f"{name}: decode step median {statistics.median(step[i]) * 1e3:.3f} ms (min {min(step[i]) * 1e3:.3f}),"
                  f" prefill median {statistics.median(pre[i]) * 1e3:.1f} ms")
        print(f"B / A decode step time: median {statistics.median(ratios):.4f}, quartiles {ratios[q]:.4f} "
              f"{ratios[-1 - q]:.4f}; same logits at every step: yes")
        per = args.rounds * args.steps
        kinds = [_kinds(s.ops, s.profile(), per) for s in sides]
        names = sorted(kinds[0], key=lambda k: -kinds[0][k])[:args.top]
        print(f"{'op (all layers)':<40} {'A ms':>8} {'B ms':>8}")
        for k in names:
            print(f"{k:<40} {kinds[0][k] * 1e3:8.3f} {kinds[1].get(k, 0.0) * 1e3:8.3f}")


if __name__ == "__main__":
    main()
