"""Synthetic kernel maps for the map, resolver and audit tests (no dependency on the real maps).

`make_map(...)` returns a valid map dict in the shape of docs/KERNEL_ABI.md; `write_maps(dir, maps)`
writes them as <id>.json and, for every variant under dir/kernels, a C source defining its symbol with
exactly the map's call_abi (what the audit's C definition check expects).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["VARIANTS", "c_definition", "make_map", "write_maps"]

AVX2 = ["avx2", "fma", "f16c"]
AVX512 = ["avx512f", "avx512bw", "avx512vl", "avx512dq"]
VARIANTS = {
    "ref": ([], []),
    "avx2": (AVX2, ["-mavx2", "-mfma", "-mf16c"]),
    "avx512": (AVX512 + AVX2, ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mf16c"]),
}


def make_map(map_id: str, *, op: str = "linear", status: str = "production", priority: int = 100,
             group: str | None = None, phases: tuple[str, ...] = ("prefill", "decode"), weight: str = "q4_k",
             act: str = "q8_k", variants: tuple[str, ...] = ("ref", "avx2", "avx512"),
             constraints: dict[str, Any] | None = None, may_alias: tuple[str, ...] = (),
             tests: tuple[str, ...] = ()) -> dict[str, Any]:
    """A valid linear-shaped map (x, w -> y) with the given selection fields and variants."""
    group = group or f"linear.{weight}.{act}.f32.v1"
    folder = op
    vs = []
    for i, name in enumerate(variants):
        req, flags = VARIANTS[name]
        vs.append({"name": name, "symbol": f"km_{map_id}__{name}", "source": f"{folder}/{map_id}_{name}.c",
                   "requires": list(req), "cflags": list(flags), "priority": 10 * i})
    y: dict[str, Any] = {"name": "y", "dtype": "f32", "shape": ["M", "N"], "layout": "row_major",
                         "access": "write", "storage": "activation"}
    if may_alias:
        y["may_alias"] = list(may_alias)
    return {
        "schema": "kernelmap.kernel_map/1",
        "id": map_id,
        "op": op,
        "interface": "linear.token_major.v1",
        "selection": {"status": status, "priority": priority, "equivalence_group": group,
                      "phases": list(phases)},
        "numerics": {"contract": group, "reference": f"km_{map_id}__ref", "comparison": "bit_exact"},
        "quant": {"weight": weight, "activation": act, "output": "f32"},
        "inputs": [{"name": "x", "dtype": act, "shape": ["M", "K"], "layout": "row_major", "access": "read",
                    "storage": "activation"}],
        "weights": [{"name": "w", "dtype": weight, "shape": ["N", "K"], "layout": "ggml_blocks",
                     "access": "read", "storage": "weight"}],
        "outputs": [y],
        "dims": ["M", "N", "K"],
        "params": [],
        "scratch": [],
        "constraints": constraints if constraints is not None else {"K": {"multiple": 256}},
        "variants": vs,
        "sources": [v["source"] for v in vs],
        "call_abi": {"version": 1, "params": [
            {"name": "y", "source": "output:y", "cast": "float *"},
            {"name": "w", "source": "weight:w", "cast": "const void *"},
            {"name": "x", "source": "activation:x", "cast": "const void *"},
            {"name": "M", "source": "dim:M"}, {"name": "N", "source": "dim:N"}, {"name": "K", "source": "dim:K"},
            {"name": "ith", "source": "runtime:ith"}, {"name": "nth", "source": "runtime:nth"}]},
        "tests": list(tests),
        "notes": "synthetic map for tests",
    }


def c_definition(m: dict[str, Any], symbol: str, *, swap: tuple[int, int] | None = None,
                 retype: dict[int, str] | None = None) -> str:
    """A C definition of `symbol` taking exactly the map's call_abi (names and the code generator's types);
    `swap` exchanges two parameter names and `retype` replaces types, to write a disagreeing source."""
    from kernelmap.codegen.bind import c_type_of

    params = [(c_type_of(cp, m), cp["name"]) for cp in m["call_abi"]["params"]]
    names = [n for _, n in params]
    if swap:
        names[swap[0]], names[swap[1]] = names[swap[1]], names[swap[0]]
    types = [(retype or {}).get(i, t) for i, (t, _) in enumerate(params)]
    args = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{n}" for t, n in zip(types, names, strict=True))
    body = " ".join(f"(void){n};" for n in names)
    return f"#include <stdint.h>\nvoid {symbol}({args}) {{ {body} }}\n"


def write_maps(root: Path, maps: list[dict[str, Any]], *, sources: bool = True) -> tuple[Path, Path]:
    """Write maps to root/maps/<id>.json and empty sources under root/kernels; return (maps dir, kernel root)."""
    mdir = root / "maps"
    kdir = root / "kernels"
    mdir.mkdir(parents=True, exist_ok=True)
    for m in maps:
        (mdir / f"{m['id']}.json").write_text(json.dumps(m, indent=1), encoding="utf-8")
        if sources:
            for v in m["variants"]:
                src = kdir / v["source"]
                src.parent.mkdir(parents=True, exist_ok=True)
                src.write_text(c_definition(m, v["symbol"]), encoding="utf-8")
    return mdir, kdir
