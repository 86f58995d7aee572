"""Benchmark: resolve 10,000 requests against a registry of 300 synthetic kernel maps on one core.

Input: nothing (maps are synthesized in memory: 30 ops x 10 providers in 3 equivalence groups, with
mixed lifecycles, phases, constraints and ISA variants). Output: one JSON line on stdout with
requests/s over the best of --repeat passes, by wall clock and by process CPU time (the bar is
>= 20,000/s on one core; CPU time is the one-core figure when the machine is oversubscribed).
It does not touch the real maps or compile anything.
Usage: .venv/bin/python benchmarks/resolve.py [--requests N] [--maps N]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Sibling scripts in benchmarks/ (e.g. tokenize.py) must not shadow stdlib modules.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402

from kernelmap.errors import ResolutionError  # noqa: E402
from kernelmap.maps.loader import load_map  # noqa: E402
from kernelmap.maps.registry import Registry  # noqa: E402
from kernelmap.resolve import Request, resolve  # noqa: E402

AVX2 = ["avx2", "fma", "f16c"]
AVX512 = ["avx512f", "avx512bw", "avx512vl", "avx512dq"]
ISAS = [frozenset(), frozenset(AVX2), frozenset(AVX2 + AVX512)]
DTYPES = ["q4_k", "q6_k", "q8_0"]


def synth_map(op: str, i: int, rng: random.Random) -> dict:
    """One provider of `op`: group i % 3, lifecycle and phases varied, three ISA variants."""
    map_id = f"{op}_p{i}"
    g = i % 3
    group = f"{op}.{DTYPES[g]}.f32.v1"
    status = "production" if i < 6 else rng.choice(["candidate", "diagnostic", "deprecated"])
    phases = [["prefill", "decode"], ["decode"], ["prefill"]][i // 3 % 3] if i < 6 else ["prefill", "decode"]
    variants = []
    for j, (name, req, flags) in enumerate([
            ("ref", [], []), ("avx2", AVX2, ["-mavx2", "-mfma", "-mf16c"]),
            ("avx512", AVX512 + AVX2, ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"])]):
        variants.append({"name": name, "symbol": f"km_{map_id}__{name}", "source": f"bench/{map_id}_{name}.c",
                         "requires": req, "cflags": flags, "priority": j * 10})
    return {
        "schema": "kernelmap.kernel_map/1", "id": map_id, "op": op, "interface": "linear.token_major.v1",
        "selection": {"status": status, "priority": 100 + 10 * i, "equivalence_group": group, "phases": phases},
        "numerics": {"contract": group, "reference": f"km_{map_id}__ref", "comparison": "bit_exact"},
        "quant": {"weight": DTYPES[g], "activation": "q8_k", "output": "f32"},
        "inputs": [{"name": "x", "dtype": "q8_k", "shape": ["M", "K"], "layout": "row_major", "access": "read",
                    "storage": "activation"}],
        "weights": [{"name": "w", "dtype": DTYPES[g], "shape": ["N", "K"], "layout": "ggml_blocks",
                     "access": "read", "storage": "weight"}],
        "outputs": [{"name": "y", "dtype": "f32", "shape": ["M", "N"], "layout": "row_major", "access": "write",
                     "storage": "activation", "may_alias": ["input:x"]}],
        "dims": ["M", "N", "K"],
        "constraints": {"K": {"multiple": rng.choice([32, 256])}, "M": {"max": 4096}},
        "variants": variants, "sources": [v["source"] for v in variants],
        "call_abi": {"version": 1, "params": [
            {"name": "y", "source": "output:y"}, {"name": "w", "source": "weight:w"},
            {"name": "x", "source": "activation:x"}, {"name": "M", "source": "dim:M"},
            {"name": "N", "source": "dim:N"}, {"name": "K", "source": "dim:K"},
            {"name": "ith", "source": "runtime:ith"}, {"name": "nth", "source": "runtime:nth"}]},
    }


def build_registry(n_maps: int, rng: random.Random) -> Registry:
    """Synthesize and validate `n_maps` maps (10 per op) through the real loader, in memory."""
    providers = []
    for k in range(n_maps):
        op, i = f"op{k // 10}", k % 10
        doc = synth_map(op, i, rng)
        providers.append(load_map(Path(f"{doc['id']}.json"), data=json.dumps(doc).encode()))
    return Registry(providers)


def make_requests(reg: Registry, n: int, rng: random.Random) -> list[Request]:
    ops = list(reg.ops)
    out = []
    for k in range(n):
        op = rng.choice(ops)
        g = rng.randrange(3)
        out.append(Request(
            op=op, phase=rng.choice(["prefill", "decode"]), contract=f"{op}.{DTYPES[g]}.f32.v1",
            ports={"x": ("q8_k", "row_major"), "w": (DTYPES[g], "ggml_blocks"), "y": ("f32", "row_major")},
            dims={"M": rng.choice([1, 7, 128]), "N": 640, "K": rng.choice([640, 1024, 2048])},
            aliases={("y", "x")} if k % 5 == 0 else frozenset(), isa=rng.choice(ISAS),
            label=f"blk.{k % 18}.{op}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--maps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="passes over the same requests; the best is reported")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    reg = build_registry(args.maps, rng)
    load_s = time.perf_counter() - t0
    requests = make_requests(reg, args.requests, rng)
    walls, cpus = [], []
    for _ in range(args.repeat):
        ok = failed = 0
        w0, c0 = time.perf_counter(), time.process_time()
        for r in requests:
            try:
                resolve(r, reg)
                ok += 1
            except ResolutionError:
                failed += 1
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    wall, cpu = min(walls), min(cpus)
    rate = args.requests / wall
    print(json.dumps({"benchmark": "resolve", "maps": len(reg), "ops": len(reg.ops), "requests": args.requests,
                      "selected": ok, "failed_closed": failed, "repeats": args.repeat,
                      "best_wall_s": round(wall, 4), "best_cpu_s": round(cpu, 4),
                      "requests_per_s": round(rate), "requests_per_cpu_s": round(args.requests / cpu),
                      "registry_load_s": round(load_s, 3), "target_requests_per_s": 20000,
                      "meets_target_wall": rate >= 20000,
                      "meets_target_one_core_cpu": args.requests / cpu >= 20000}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
