"""Bench stage: llama.cpp's own time for the linear points of a bench report (`kernelmap bench --peer PYTHON`).

Input: the providers and the BenchReport of a run, and the peer's interpreter (llama-cpp-python). Output:
{(provider, shape, rows, threads): seconds} from bench/peer_ops.py run in that interpreter (one ggml mul_mat
node of the provider's weight type at the same N, K, M and thread count, in the peer's repack buffer where
llama.cpp repacks, cold (rotating weight copies) unless --hot). Only linear points are asked for; a type the peer cannot run is left out.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kernelmap.bench.runner import llc_bytes
from kernelmap.bench.workload import bench_cases
from kernelmap.errors import RequestError

__all__ = ["PEER_SCRIPT", "peer_linear_times"]

PEER_SCRIPT = Path(__file__).resolve().parent / "peer_ops.py"
_PEER_TYPES = {"f32", "f16", "bf16", "q4_0", "iq4_nl", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"}


def peer_linear_times(providers: list[Any], report: Any, python: Path, min_time: float,
                      cold: bool = True) -> dict[tuple, float]:
    """Median seconds llama.cpp takes for each linear result's shape, keyed (provider, shape, rows, threads).

    With `cold` the peer rotates over weight copies streaming 3x the last-level cache, as run_bench does.
    """
    cold_bytes = 3 * llc_bytes() if cold else 0
    by_id = {p.id: p for p in providers}
    points: dict[tuple, dict[str, Any]] = {}
    keys: dict[tuple, list[tuple]] = {}
    for r in report.results:
        p = by_id.get(r.provider)
        if p is None or p.op != "linear":
            continue
        wtype = p.raw.get("quant", {}).get("weight")
        dims = next((c["dims"] for c in bench_cases(r.interface)[1] if c["label"] == r.shape), None)
        if wtype not in _PEER_TYPES or dims is None:
            continue
        point = (wtype, int(dims["N"]), int(dims["K"]), r.rows, r.threads)
        points[point] = {"type": wtype, "N": point[1], "K": point[2], "M": r.rows, "threads": r.threads,
                         "min_time": min_time, "cold_bytes": cold_bytes}
        keys.setdefault(point, []).append((r.provider, r.shape, r.rows, r.threads))
    if not points:
        return {}
    try:
        res = subprocess.run([str(python), "-P", str(PEER_SCRIPT)], input=json.dumps(list(points.values())),
                             capture_output=True, text=True, check=False, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RequestError(f"cannot run the peer: {exc}", pointer="--peer", value=str(python)) from None
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("[")), None)
    if res.returncode != 0 or line is None:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise RequestError(f"the peer's op timing failed: {tail}", pointer="--peer", value=str(python),
                           hint="pass the llama-cpp-python interpreter, e.g. --peer .venv-peer/bin/python")
    out: dict[tuple, float] = {}
    for row in json.loads(line):
        point = (row["type"], row["N"], row["K"], row["M"], row["threads"])
        for key in keys.get(point, []):
            out[key] = float(row["seconds"])
    return out
