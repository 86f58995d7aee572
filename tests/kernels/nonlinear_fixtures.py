"""Fixtures from llama.cpp for the non-linear kernel tests: deterministic inputs and hashes of ggml's outputs.

The hashes live in tests/fixtures/llama_nonlinear.json, written by this module's producer, which runs
ggml from the peer's llama-cpp-python build (tests/fixtures/ggml_peer.py) on the inputs `det_f32`
generates: ggml_mul(ggml_rms_norm(x, 1e-6), w), ggml_rope_ext (NeoX base 1e4 / normal base 1e6,
positions 1000..1002, freq_scale 1, ext_factor 0), ggml_geglu_split, and the range of
ggml_table_gelu_f16 that geglu_tanh_f32's table copies. A kernel whose bytes hash the same is bit-exact
with llama.cpp's CPU backend. The JSON also records the llama.cpp build that produced the hashes.

    .venv-peer/bin/python tests/kernels/nonlinear_fixtures.py --check   # recompute, compare, exit 1 on a difference
    .venv-peer/bin/python tests/kernels/nonlinear_fixtures.py --write   # rewrite the JSON (`make fixtures`)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["det_f32", "sha256_of", "LLAMA_SHA256", "LLAMA_GELU_TABLE_SHA256", "FIXTURE", "produce", "main"]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "llama_nonlinear.json"
_DOC = json.loads(FIXTURE.read_text(encoding="utf-8"))
LLAMA_SHA256: dict[str, str] = _DOC["sha256"]
LLAMA_GELU_TABLE_SHA256: str = _DOC["gelu_table_sha256"]


def det_f32(n: int, seed: int, lo: float, hi: float) -> np.ndarray:
    """n deterministic f32 values in [lo, hi): a multiplicative hash of the index, exact f32 arithmetic."""
    s = (np.arange(n, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(seed * 40503)) & np.uint64(0xFFFFFFFF)
    u = ((s >> np.uint64(8)).astype(np.float64) / 2**24).astype(np.float32)
    return (np.float32(lo) + u * np.float32(hi - lo)).astype(np.float32)


def sha256_of(arr: np.ndarray) -> str:
    """Hash of an array's little-endian bytes."""
    return hashlib.sha256(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()).hexdigest()


def produce() -> dict:
    """Run ggml (peer venv only) on the fixtures' inputs; the JSON document with its hashes and the peer build."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    sys.path.insert(0, str(fixtures))
    import ctypes

    from ggml_peer import GGML_ROPE_TYPE_NEOX, Ggml
    from peer_build import peer_info

    out = {}
    with Ggml() as g:
        x, w = det_f32(640 * 3, 1, -3, 3).reshape(3, 640), det_f32(640, 2, 0.5, 1.5)
        out["rmsnorm_3x640"] = sha256_of(g.rms_norm_mul(x, w, 1e-6))
        x = det_f32(256 * 2 * 3, 3, -4, 4).reshape(3, 2, 256)
        pos = np.arange(1000, 1003)
        out["rope_neox_3x2x256"] = sha256_of(g.rope(x, pos, GGML_ROPE_TYPE_NEOX, 10000.0).reshape(3, 512))
        out["rope_normal_3x2x256"] = sha256_of(g.rope(x, pos, 0, 1e6).reshape(3, 512))
        gate, up = det_f32(2048, 4, -12, 12).reshape(2, 1024), det_f32(2048, 5, -2, 2).reshape(2, 1024)
        out["geglu_2x1024"] = sha256_of(g.geglu(gate, up))
        table = np.ctypeslib.as_array((ctypes.c_uint16 * 65536).in_dll(g.cpu, "ggml_table_gelu_f16")).copy()
    part = np.concatenate([table[0x0000:0x4901], table[0x8000:0xC901], np.zeros(1, np.uint16)])
    return {"producer": "tests/kernels/nonlinear_fixtures.py (ggml ops of the peer build via tests/fixtures/ggml_peer.py)",
            "peer": peer_info(), "sha256": out,
            "gelu_table_note": "ggml_table_gelu_f16[0x0000..0x4900] + [0x8000..0xC900] + one zero uint16, little-endian, "
                               "after ggml_cpu_init()",
            "gelu_table_sha256": hashlib.sha256(part.astype("<u2").tobytes()).hexdigest()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="recompute the llama.cpp hashes of tests/fixtures/llama_nonlinear.json")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare with the committed hashes; exit 1 on a difference")
    mode.add_argument("--write", action="store_true", help="rewrite the fixture file")
    args = ap.parse_args(argv)
    doc = produce()
    if args.write:
        tmp = FIXTURE.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        tmp.replace(FIXTURE)
        print(f"wrote {FIXTURE}")
        return 0
    want = {**LLAMA_SHA256, "gelu_table": LLAMA_GELU_TABLE_SHA256}
    got = {**doc["sha256"], "gelu_table": doc["gelu_table_sha256"]}
    bad = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    for k in sorted(want.keys() | got.keys()):
        print(f"{'ok ' if k not in bad else 'BAD'} {k}: {got.get(k)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
