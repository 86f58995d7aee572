"""Differential tests for the fused kernels: every variant bit-identical with the unfused pair it replaces.

residual_add_rmsnorm_f32 is checked against residual_add_f32 then rmsnorm_f32 (both ref, from their own
maps' libraries) and against a NumPy transcription of the contract; every variant, nth = 1, 2, 3,
guard bytes around both outputs, in place (y aliasing a) included.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    load_map_library,
    map_variants,
    ptr,
    skip_unless_runnable,
)

MAP = "residual_add_rmsnorm_f32"
SHAPES = {"decode_1x640": (1, 640), "one_elem": (1, 1), "odd_3x37": (3, 37), "tail_5x17": (5, 17),
          "prefill_17x640": (17, 640)}
EPS = 1e-6


def _inputs(m: int, n: int, seed: int, big: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n)).astype(np.float32) * np.float32(1e3 if big else 1.0)
    b = rng.standard_normal((m, n)).astype(np.float32)
    w = (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    if m > 1:
        a[1] = 0.0
        b[1] = 0.0  # an all-zero row: mean 0, scale 1/sqrt(eps)
    return a, b, w


def _unfused(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """residual_add_f32 then rmsnorm_f32, both ref, called through their own maps."""
    m, n = a.shape
    add_lib, add_spec = load_map_library("residual_add_f32")
    norm_lib, norm_spec = load_map_library("rmsnorm_f32")
    y = np.empty((m, n), np.float32)
    h = np.empty((m, n), np.float32)
    bind(add_lib, add_spec, "ref")(ptr(y), ptr(a), ptr(b), m, n, 0, 1)
    bind(norm_lib, norm_spec, "ref")(ptr(h), ptr(y), ptr(w), m, n, EPS, 0, 1)
    return y, h


def _numpy_contract(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = (a + b).astype(np.float32)
    sq = (y * y).astype(np.float32).astype(np.float64)
    m, n = y.shape
    part = np.zeros((m, 16))
    for i in range(n):
        part[:, i & 15] += sq[:, i]
    for s in (8, 4, 2, 1):
        part[:, :s] += part[:, s:2 * s]
    mean = (part[:, 0] / n).astype(np.float32)
    scale = (np.float32(1.0) / np.sqrt(mean + np.float32(EPS), dtype=np.float32)).astype(np.float32)
    h = ((y * scale[:, None]).astype(np.float32) * w).astype(np.float32)
    return y, h


@pytest.mark.parametrize("variant", map_variants(MAP))
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_residual_add_rmsnorm_variants_match_unfused_pair(variant, shape):
    skip_unless_runnable(MAP, variant)
    lib, spec = load_map_library(MAP)
    fn = bind(lib, spec, variant)
    m, n = shape
    for big in (False, True):
        a, b, w = _inputs(m, n, m * 1000 + n, big)
        want_y, want_h = _unfused(a, b, w)
        for nth in (1, 2, 3):
            y, check_y = guarded((m, n), np.float32)
            h, check_h = guarded((m, n), np.float32)
            for ith in range(nth):
                fn(ptr(y), ptr(h), ptr(a), ptr(b), ptr(w), m, n, EPS, ith, nth)
                check_y()
                check_h()
            ctx = f"{shape} big={big} nth={nth}"
            assert_close_or_equal(want_y, y, map_id=MAP, variant=variant, context=ctx + " output y")
            assert_close_or_equal(want_h, h, map_id=MAP, variant=variant, context=ctx + " output h")
        y, check_y = guarded((m, n), np.float32)
        y[...] = a
        h, check_h = guarded((m, n), np.float32)
        for ith in range(2):
            fn(ptr(y), ptr(h), ptr(y), ptr(b), ptr(w), m, n, EPS, ith, 2)
        check_y()
        check_h()
        assert_close_or_equal(want_y, y, map_id=MAP, variant=variant, context=f"{shape} in place y")
        assert_close_or_equal(want_h, h, map_id=MAP, variant=variant, context=f"{shape} in place h")


@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_residual_add_rmsnorm_ref_matches_numpy(shape):
    lib, spec = load_map_library(MAP)
    fn = bind(lib, spec, "ref")
    m, n = shape
    a, b, w = _inputs(m, n, 7 * m + n)
    y = np.empty((m, n), np.float32)
    h = np.empty((m, n), np.float32)
    fn(ptr(y), ptr(h), ptr(a), ptr(b), ptr(w), m, n, EPS, 0, 1)
    want_y, want_h = _numpy_contract(a, b, w)
    assert_close_or_equal(want_y, y, map_id=MAP, variant="ref", context=f"{shape} numpy y")
    assert_close_or_equal(want_h, h, map_id=MAP, variant="ref", context=f"{shape} numpy h")


QK_MAP = "qk_norm_rope_neox_f32"
QK_SHAPES = {"decode_q_1x4x256": (1, 4, 256), "decode_k_1x1x256": (1, 1, 256), "odd_3x3x18": (3, 3, 18),
             "tail_2x2x34": (2, 2, 34), "prefill_9x4x256": (9, 4, 256), "one_pair": (1, 1, 2)}


def _qk_unfused(x, w, m, h, d, pos, base):
    norm_lib, norm_spec = load_map_library("qk_norm_f32")
    rope_lib, rope_spec = load_map_library("rope_neox_f32")
    t = np.empty((m, h * d), np.float32)
    y = np.empty((m, h * d), np.float32)
    bind(norm_lib, norm_spec, "ref")(ptr(t), ptr(x), ptr(w), m, h, d, EPS, 0, 1)
    bind(rope_lib, rope_spec, "ref")(ptr(y), ptr(t), m, h, d, pos, base, 1.0, 0, 1)
    return y


@pytest.mark.parametrize("variant", map_variants(QK_MAP))
@pytest.mark.parametrize("shape", list(QK_SHAPES.values()), ids=list(QK_SHAPES))
def test_qk_norm_rope_variants_match_unfused_pair(variant, shape):
    skip_unless_runnable(QK_MAP, variant)
    lib, spec = load_map_library(QK_MAP)
    fn = bind(lib, spec, variant)
    m, h, d = shape
    rng = np.random.default_rng(m * 100 + h * 10 + d)
    w = (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)
    for pos, base, mag in ((0, 10000.0, 1.0), (37, 1e6, 1e3), (500, 10000.0, 1e-3)):
        x = (rng.standard_normal((m, h * d)) * mag).astype(np.float32)
        if m > 1:
            x[1, :d] = 0.0  # an all-zero head
        want = _qk_unfused(x, w, m, h, d, pos, base)
        for nth in (1, 2, 3):
            y, check = guarded((m, h * d), np.float32)
            for ith in range(nth):
                fn(ptr(y), ptr(x), ptr(w), m, h, d, pos, EPS, base, 1.0, ith, nth)
                check()
            assert_close_or_equal(want, y, map_id=QK_MAP, variant=variant,
                                  context=f"{shape} pos={pos} base={base} nth={nth}")
        y, check = guarded((m, h * d), np.float32)
        y[...] = x
        for ith in range(2):
            fn(ptr(y), ptr(y), ptr(w), m, h, d, pos, EPS, base, 1.0, ith, 2)
        check()
        assert_close_or_equal(want, y, map_id=QK_MAP, variant=variant, context=f"{shape} pos={pos} in place")


RQ_MAP = "residual_add_rmsnorm_quantize_q8_0_rne"
RQ_SHAPES = {"decode_1x640": (1, 640), "one_block": (1, 32), "odd_3x96": (3, 96), "prefill_9x640": (9, 640)}


@pytest.mark.parametrize("variant", map_variants(RQ_MAP))
@pytest.mark.parametrize("shape", list(RQ_SHAPES.values()), ids=list(RQ_SHAPES))
def test_residual_add_rmsnorm_quantize_q8_0_rne_variants_match_unfused_pair(variant, shape):
    skip_unless_runnable(RQ_MAP, variant)
    lib, spec = load_map_library(RQ_MAP)
    fn = bind(lib, spec, variant)
    qlib, qspec = load_map_library("quantize_act_q8_0_rne")
    quant = bind(qlib, qspec, "ref")
    m, n = shape
    row_bytes = n // 32 * 34
    for big in (False, True):
        a, b, w = _inputs(m, n, m * 31 + n, big)
        if m > 2:
            a[2, :32] = 0.0
            b[2, :32] = 0.0  # one all-zero block in a non-zero row: d = 0, zero quants
        want_y, h = _unfused(a, b, w)
        want_q = np.zeros((m, row_bytes), np.uint8)
        quant(ptr(want_q), ptr(h), m, n, 0, 1)
        for nth in (1, 2, 3):
            y, check_y = guarded((m, n), np.float32)
            qo, check_q = guarded((m, row_bytes), np.uint8)
            for ith in range(nth):
                fn(ptr(y), ptr(qo), ptr(a), ptr(b), ptr(w), m, n, EPS, ith, nth)
                check_y()
                check_q()
            ctx = f"{shape} big={big} nth={nth}"
            assert_close_or_equal(want_y, y, map_id=RQ_MAP, variant=variant, context=ctx + " output y")
            assert_close_or_equal(want_q, qo, map_id=RQ_MAP, variant=variant, context=ctx + " output q (bytes)")


RK_MAP = "residual_add_rmsnorm_quantize_q8_k"
RK_SHAPES = {"one_block": (1, 256), "decode_1x1024": (1, 1024), "prefill_5x512": (5, 512)}


@pytest.mark.parametrize("variant", map_variants(RK_MAP))
@pytest.mark.parametrize("shape", list(RK_SHAPES.values()), ids=list(RK_SHAPES))
def test_residual_add_rmsnorm_quantize_q8_k_variants_match_unfused_pair(variant, shape):
    skip_unless_runnable(RK_MAP, variant)
    lib, spec = load_map_library(RK_MAP)
    fn = bind(lib, spec, variant)
    qlib, qspec = load_map_library("quantize_act_q8_k")
    quant = bind(qlib, qspec, "ref")
    m, n = shape
    row_bytes = n // 256 * 292
    for big in (False, True):
        a, b, w = _inputs(m, n, m * 17 + n, big)
        if m > 2:
            a[2, :256] = 0.0
            b[2, :256] = 0.0  # one all-zero block in a non-zero row: d = 0, zero quants and bsums
            a[3, 7], b[3, 7] = 50.0, 0.0  # a tie for the block's |max| with opposite signs: the first wins
            a[3, 9], b[3, 9] = -50.0, 0.0
            w[9] = w[7]
        want_y, h = _unfused(a, b, w)
        want_q = np.zeros((m, row_bytes), np.uint8)
        quant(ptr(want_q), ptr(h), m, n, 0, 1)
        for nth in (1, 2, 3):
            y, check_y = guarded((m, n), np.float32)
            qo, check_q = guarded((m, row_bytes), np.uint8)
            for ith in range(nth):
                fn(ptr(y), ptr(qo), ptr(a), ptr(b), ptr(w), m, n, EPS, ith, nth)
                check_y()
                check_q()
            ctx = f"{shape} big={big} nth={nth}"
            assert_close_or_equal(want_y, y, map_id=RK_MAP, variant=variant, context=ctx + " output y")
            assert_close_or_equal(want_q, qo, map_id=RK_MAP, variant=variant, context=ctx + " output q (bytes)")


GQ_SHAPES = {"one_block": (1, 256), "decode_1x2048": (1, 2048), "prefill_5x512": (5, 512)}
GQ_KINDS = {"geglu_quantize_q8_0_rne": ("quantize_act_q8_0_rne", 32, 34),
            "geglu_quantize_q8_k": ("quantize_act_q8_k", 256, 292)}
GQ_CASES = [(mid, v) for mid in GQ_KINDS for v in map_variants(mid)]


def _gq_inputs(m: int, f: int, seed: int, big: bool) -> tuple[np.ndarray, np.ndarray]:
    """Gates over the table's whole range and past it (|x| >= 10: the x * up and 0 branches), every block of the
    first row's second half all zero (d = 0), a tie for a q8_K block's |max| with opposite signs."""
    rng = np.random.default_rng(seed)
    gate = (rng.standard_normal((m, f)) * (6.0 if big else 1.5)).astype(np.float32)
    up = (rng.standard_normal((m, f)) * (1e3 if big else 1.0)).astype(np.float32)
    gate.flat[:: 97] = np.float32(11.5)
    gate.flat[5:: 89] = np.float32(-12.0)
    up[0, f // 2:] = 0.0
    if f >= 256:
        gate[-1, 3], up[-1, 3] = 20.0, 40.0  # geglu = 800 (x >= 10: x * up)
        gate[-1, 7], up[-1, 7] = 20.0, -40.0  # -800: the same |max| later, opposite sign (q8_K: the first wins)
    return gate, up


@pytest.mark.parametrize(("map_id", "variant"), GQ_CASES, ids=[f"{m}-{v}" for m, v in GQ_CASES])
@pytest.mark.parametrize("shape", list(GQ_SHAPES.values()), ids=list(GQ_SHAPES))
def test_geglu_quantize_variants_match_unfused_pair(map_id, variant, shape):
    """geglu_tanh_f32 then the quantizer (both ref, through their own maps) against the fused op: every variant,
    nth = 1, 2, 3 (a one-row step splits its blocks across threads), guard bytes around the output."""
    skip_unless_runnable(map_id, variant)
    quant_map, qk, qbytes = GQ_KINDS[map_id]
    fn = bind(*load_map_library(map_id), variant)
    geglu = bind(*load_map_library("geglu_tanh_f32"), "ref")
    quant = bind(*load_map_library(quant_map), "ref")
    m, f = shape
    row_bytes = f // qk * qbytes
    for big in (False, True):
        gate, up = _gq_inputs(m, f, m * 13 + f + big, big)
        h = np.empty((m, f), np.float32)
        geglu(ptr(h), ptr(gate), ptr(up), m, f, 0, 1)
        want = np.zeros((m, row_bytes), np.uint8)
        quant(ptr(want), ptr(h), m, f, 0, 1)
        for nth in (1, 2, 3):
            got, check = guarded((m, row_bytes), np.uint8)
            for ith in range(nth):
                fn(ptr(got), ptr(gate), ptr(up), m, f, ith, nth)
                check()
            assert_close_or_equal(want, got, map_id=map_id, variant=variant,
                                  context=f"{shape} big={big} nth={nth} output q (bytes)")
