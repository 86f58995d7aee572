"""Shared inputs and runner of the flash-attention-order kernel tests (test_attention_ggmlfa*.py).

A case is (M, Hq, Hkv, D, C, pos, window, scale, data): M query rows at positions pos .. pos+M-1 over
head-major f16 caches of C rows, with `data` one of normal, zeros (q = 0: all scores tie), large (big
scores and values), tiny (q * scale in f16's subnormal range), rising (a new running maximum at many
keys), rising_slow (the same, gentler, for caches of ~1000 rows). Cache rows at or beyond pos + M are NaN,
so a kernel that reads a key it must not see fails loudly. The oracle is tests/parity_fa/fa_emulation.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from kernel_harness import guarded, ptr, run_partitioned

__all__ = ["emulation", "inputs", "run"]

_EMU_PATH = Path(__file__).resolve().parents[1] / "parity_fa" / "fa_emulation.py"


def emulation():
    """tests/parity_fa/fa_emulation.py as a module."""
    spec = importlib.util.spec_from_file_location("fa_emulation", _EMU_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def inputs(case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q f32 [M, Hq*D], k_cache f16 [Hkv, C, D], v_cache f16 [Hkv, C, D]) of a case, deterministic."""
    m, hq, hkv, d, c, pos, _window, _scale, data = case
    rng = np.random.default_rng(m * 7919 + hq * 31 + d + pos + len(data))
    q = rng.standard_normal((m, hq * d)).astype(np.float32) * 4.0
    k = rng.standard_normal((hkv, c, d)).astype(np.float32)
    v = rng.standard_normal((hkv, c, d)).astype(np.float32)
    if data == "zeros":
        q[:] = 0.0
    elif data == "large":
        q *= 50.0
        k *= 30.0
        v *= 1000.0
    elif data == "tiny":
        q *= 2e-4  # q * scale lands in f16's subnormal range
    elif data in ("rising", "rising_slow"):
        step = 8.0 if data == "rising" else 64.0
        k *= (np.arange(c, dtype=np.float32) / step)[None, :, None]  # a new running max at many keys
    kc = k.astype(np.float16)
    vc = v.astype(np.float16)
    kc[:, pos + m:, :] = np.nan
    vc[:, pos + m:, :] = np.nan
    return q, kc, vc


def run(fn, q, kc, vc, case, nth, threaded=False) -> np.ndarray:
    """y f32 [M, Hq*D] of one attention kernel over the case, all nth slices (canary-guarded)."""
    m, hq, hkv, d, c, pos, window, scale, _data = case
    y, check = guarded((m, hq * d), np.float32)
    run_partitioned(fn, (ptr(y), ptr(q), ptr(kc), ptr(vc), m, hq, hkv, d, c, pos, scale, window), nth, threaded=threaded)
    check()
    return y.copy()
