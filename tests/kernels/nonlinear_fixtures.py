"""Fixtures from llama.cpp for the non-linear kernel tests: deterministic inputs and hashes of ggml's outputs.

The hashes were produced once by running ggml (libggml-cpu 0.25.3 from the peer llama-cpp-python
build, this machine's glibc) on the inputs `det_f32` generates: ggml_mul(ggml_rms_norm(x, 1e-6), w),
ggml_rope_ext (NeoX base 1e4 / normal base 1e6, positions 1000..1002, freq_scale 1, ext_factor 0)
and ggml_geglu_split. A kernel whose bytes hash the same is bit-exact with llama.cpp's CPU backend.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["det_f32", "sha256_of", "LLAMA_SHA256"]

LLAMA_SHA256 = {
    "rmsnorm_3x640": "54910e20645ad6349892414a7215997bdd7f4a27fe46e775c6e6f4aa8307aa96",
    "rope_neox_3x2x256": "e4069dc1e083bb6a2d930c4eb561a04f632154f83888c8dfd6dc32b791657097",
    "rope_normal_3x2x256": "c78a91490d1387bcee1c040d741f1ee74e9d0325fab322babc5db3db9c322bbc",
    "geglu_2x1024": "08c746562ff2fe0f961b8a0f90eb9ede0c801c7a47b7b2cc3445aa3918e03e3b",
}


def det_f32(n: int, seed: int, lo: float, hi: float) -> np.ndarray:
    """n deterministic f32 values in [lo, hi): a multiplicative hash of the index, exact f32 arithmetic."""
    s = (np.arange(n, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(seed * 40503)) & np.uint64(0xFFFFFFFF)
    u = ((s >> np.uint64(8)).astype(np.float64) / 2**24).astype(np.float32)
    return (np.float32(lo) + u * np.float32(hi - lo)).astype(np.float32)


def sha256_of(arr: np.ndarray) -> str:
    """Hash of an array's little-endian bytes."""
    return hashlib.sha256(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()).hexdigest()
