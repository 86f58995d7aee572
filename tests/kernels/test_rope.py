"""Differential tests for rope_neox_f32 and rope_normal_f32: variants bit-exact with ref, ref equal to NumPy.

The NumPy oracle recomputes the contract: theta_scale = powf(base, -2/D) (f32), theta multiplied
by theta_scale pair after pair in f32, t = freq_scale*theta, cos/sin from the C library's cosf/sinf
(ctypes, the functions ref calls), rotation y0 = fma(x0, c, -(x1*s)), y1 = fma(x0, s, x1*c) with the
C library's fmaf. A float64 check bounds the f32
angle recurrence against the exact rotation.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    load_map_library,
    map_variants,
    ptr,
    runnable_variants,
    skip_unless_runnable,
)
from nonlinear_fixtures import LLAMA_SHA256, det_f32, sha256_of

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
for _name in ("cosf", "sinf"):
    getattr(_LIBM, _name).argtypes = [ctypes.c_float]
    getattr(_LIBM, _name).restype = ctypes.c_float
_LIBM.powf.argtypes = [ctypes.c_float, ctypes.c_float]
_LIBM.powf.restype = ctypes.c_float
_LIBM.fmaf.argtypes = [ctypes.c_float, ctypes.c_float, ctypes.c_float]
_LIBM.fmaf.restype = ctypes.c_float
_FMA = np.frompyfunc(lambda a, b, c: _LIBM.fmaf(float(a), float(b), float(c)), 3, 1)

KINDS = ("neox", "normal")
MAP_IDS = {kind: f"rope_{kind}_f32" for kind in KINDS}
ALL = [(kind, v) for kind in KINDS for v in map_variants(MAP_IDS[kind])]
SIMD = [(kind, v) for kind, v in ALL if v != "ref"]


def rope_numpy(x: np.ndarray, h: int, d: int, pos: int, base: float, fscale: float, kind: str) -> np.ndarray:
    """The contract: x f32 [M, H*D] -> y f32 [M, H*D]."""
    m = x.shape[0]
    ts = np.float32(_LIBM.powf(np.float32(base), np.float32(-2.0) / np.float32(d)))
    y = np.empty_like(x)
    for r in range(m):
        theta = np.float32(pos + r)
        cs = np.empty(d // 2, np.float32)
        sn = np.empty(d // 2, np.float32)
        for i in range(d // 2):
            t = np.float32(np.float32(fscale) * theta)
            cs[i], sn[i] = _LIBM.cosf(t), _LIBM.sinf(t)
            theta = np.float32(theta * ts)
        heads = x[r].reshape(h, d)
        if kind == "neox":
            x0, x1 = heads[:, : d // 2], heads[:, d // 2:]
        else:
            x0, x1 = heads[:, 0::2], heads[:, 1::2]
        y0 = _FMA(x0, cs, -(x1 * sn)).astype(np.float32)
        y1 = _FMA(x0, sn, x1 * cs).astype(np.float32)
        out = np.empty((h, d), np.float32)
        if kind == "neox":
            out[:, : d // 2], out[:, d // 2:] = y0, y1
        else:
            out[:, 0::2], out[:, 1::2] = y0, y1
        y[r] = out.reshape(-1)
    return y


CASES = {
    # name: (M, H, D, pos, base, freq_scale)
    "decode_q_4x256_pos0": (1, 4, 256, 0, 10000.0, 1.0),
    "decode_k_1x256_pos777": (1, 1, 256, 777, 1e6, 1.0),
    "prefill_9x4x256_pos30": (9, 4, 256, 30, 10000.0, 1.0),
    "small_d_3x3x6": (3, 3, 6, 5, 10000.0, 0.5),
    "d2": (2, 2, 2, 1, 500.0, 1.0),
    "d128_far": (2, 2, 128, 32000, 1e6, 0.25),
}


@pytest.fixture(scope="module", params=KINDS)
def kind_lib(request):
    lib, spec = load_map_library(MAP_IDS[request.param])
    return request.param, lib, spec


def _inputs(m, h, d):
    rng = np.random.default_rng(m * 131 + h * 7 + d)
    x = rng.standard_normal((m, h * d)).astype(np.float32)
    x[0, : min(4, d)] = 0.0
    return x


def _run(fn, x, h, d, pos, base, fscale, nth, in_place=False):
    m = x.shape[0]
    y, check = guarded(x.shape, np.float32)
    if in_place:
        y[...] = x
        src = y
    else:
        src = np.ascontiguousarray(x)
    for ith in range(nth):
        fn(ptr(y), ptr(src), m, h, d, pos, base, fscale, ith, nth)
        check()
    return y.copy()


@pytest.mark.parametrize("kind,variant", SIMD, ids=[f"{k}-{v}" for k, v in SIMD])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_rope_variants_match_ref(kind, variant, case):
    lib, spec = load_map_library(MAP_IDS[kind])
    map_id = spec["id"]
    skip_unless_runnable(map_id, variant)
    m, h, d, pos, base, fscale = CASES[case]
    x = _inputs(m, h, d)
    expected = _run(bind(lib, spec, "ref"), x, h, d, pos, base, fscale, 1)
    fn = bind(lib, spec, variant)
    for nth in (1, 2, 3):
        got = _run(fn, x, h, d, pos, base, fscale, nth)
        assert_close_or_equal(expected, got, map_id=map_id, variant=variant, context=f"{case} nth={nth}")
    got = _run(fn, x, h, d, pos, base, fscale, 2, in_place=True)
    assert_close_or_equal(expected, got, map_id=map_id, variant=variant, context=f"{case} in place")


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_rope_ref_matches_numpy(kind_lib, case):
    kind, lib, spec = kind_lib
    m, h, d, pos, base, fscale = CASES[case]
    x = _inputs(m, h, d)
    got = _run(bind(lib, spec, "ref"), x, h, d, pos, base, fscale, 3)
    want = rope_numpy(x, h, d, pos, base, fscale, kind)
    assert_close_or_equal(want, got, map_id=spec["id"], variant="ref", context=f"{case} vs numpy")


def test_rope_ref_close_to_float64_rotation(kind_lib):
    kind, lib, spec = kind_lib
    m, h, d, pos, base = 4, 2, 256, 100, 10000.0
    x = _inputs(m, h, d)
    got = _run(bind(lib, spec, "ref"), x, h, d, pos, base, 1.0, 1)
    i = np.arange(d // 2)
    want = np.empty((m, h, d))
    for r in range(m):
        ang = (pos + r) * base ** (-2.0 * i / d)
        heads = x[r].reshape(h, d).astype(np.float64)
        x0, x1 = (heads[:, : d // 2], heads[:, d // 2:]) if kind == "neox" else (heads[:, 0::2], heads[:, 1::2])
        y0, y1 = x0 * np.cos(ang) - x1 * np.sin(ang), x0 * np.sin(ang) + x1 * np.cos(ang)
        if kind == "neox":
            want[r, :, : d // 2], want[r, :, d // 2:] = y0, y1
        else:
            want[r, :, 0::2], want[r, :, 1::2] = y0, y1
    assert_close_or_equal(want.reshape(m, -1), got.astype(np.float64), map_id=spec["id"], variant="ref",
                          comparison={"rtol": 0.0, "atol": 2e-3}, context="vs float64 rotation")


@pytest.mark.parametrize("kind,variant", ALL, ids=[f"{k}-{v}" for k, v in ALL])
def test_rope_matches_llama_cpp(kind, variant):
    lib, spec = load_map_library(MAP_IDS[kind])
    skip_unless_runnable(spec["id"], variant)
    x = det_f32(256 * 2 * 3, 3, -4, 4).reshape(3, 2 * 256)
    base = 10000.0 if kind == "neox" else 1e6
    got = _run(bind(lib, spec, variant), x, 2, 256, 1000, base, 1.0, 2)
    assert sha256_of(got) == LLAMA_SHA256[f"rope_{kind}_3x2x256"], f"{spec['id']} [{variant}] differs from ggml_rope_ext"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 5), h=st.integers(1, 5), half=st.integers(1, 256), pos=st.integers(0, 100000),
       base=st.sampled_from([500.0, 10000.0, 1e6]), fscale=st.sampled_from([1.0, 0.5, 0.125]), nth=st.integers(1, 4))
def test_rope_random_shapes_property(kind_lib, m, h, half, pos, base, fscale, nth):
    """Random shapes and positions: every runnable SIMD variant equals ref bit for bit (any nth, in place)."""
    kind, lib, spec = kind_lib
    d = 2 * half
    x = _inputs(m, h, d)
    ref = _run(bind(lib, spec, "ref"), x, h, d, pos, base, fscale, 1)
    for variant in runnable_variants(spec["id"], ref=False):
        got = _run(bind(lib, spec, variant), x, h, d, pos, base, fscale, nth, in_place=True)
        assert_close_or_equal(ref, got, map_id=spec["id"], variant=variant, context=f"{m}x{h}x{d} pos={pos}")


# (pos, base, freq_scale, D): positions 5 and 133 share a memo set (common/km_rope.h: 128 sets of 2 ways), three
# bases in one set evict each other, and the same position with another freq_scale, D or base must never be served
# the wrong tables (base 100 at D 128 has the same f32 theta_scale as base 10000 at D 256: only the width differs, and a
# 128-float request must not take a way filled with 64).
MEMO_SEQUENCE = [(5, 100.0, 1.0, 128), (5, 10000.0, 1.0, 256), (5, 1e6, 1.0, 256), (5, 100.0, 1.0, 128),
                 (5, 10000.0, 1.0, 256), (5, 1e6, 1.0, 256), (133, 10000.0, 1.0, 256), (5, 10000.0, 1.0, 256),
                 (5, 10000.0, 0.5, 256), (5, 10000.0, 1.0, 128), (5, 5e5, 1.0, 256), (5, 1e6, 1.0, 256),
                 (133, 1e6, 1.0, 256), (5, 10000.0, 1.0, 256), (4, 10000.0, 1.0, 256), (261, 10000.0, 1.0, 256),
                 (5, 10000.0, 1.0, 256), (100000, 1e6, 0.125, 512), (100000, 1e6, 0.125, 512)]


@pytest.mark.parametrize("kind,variant", SIMD, ids=[f"{k}-{v}" for k, v in SIMD])
def test_rope_table_memo_never_serves_other_tables(kind, variant):
    """The SIMD variants keep each thread's row tables in a memo keyed by (position, theta_scale, freq_scale, width,
    style); the refs compute every table. One process, calls whose keys collide in a set or differ in one field only:
    every call equals ref bit for bit (3 rows from each position, so neighbouring sets are filled too)."""
    lib, spec = load_map_library(MAP_IDS[kind])
    skip_unless_runnable(spec["id"], variant)
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    for pos, base, fscale, d in MEMO_SEQUENCE:
        if kind == "normal" and d > 256:
            d = 256  # the widest normal table the memo holds (wider ones always compute: also checked above)
        x = _inputs(3, 2, d)
        want = _run(ref, x, 2, d, pos, base, fscale, 1)
        got = _run(fn, x, 2, d, pos, base, fscale, 1)
        assert_close_or_equal(want, got, map_id=spec["id"], variant=variant, context=f"pos={pos} base={base} "
                              f"fscale={fscale} D={d}")


_MEMO_STYLES_C = r"""
#include "km_lanes_avx2.h"
#include "km_rope.h"
/* Both styles' callers in one translation unit share one memo (a unity build would do this): a neox table of 128
 * floats (D 256, base 10000) and a normal one of 128 (D 128, base 100) have the same position, theta_scale bits and
 * width, so only the style tells them apart. Returns the number of floats that differ from krp_cache's. */
int km_test_rope_memo_styles(void) {
    int bad = 0;
    const float ts_neox = krp_theta_scale(10000.0f, 256), ts_normal = krp_theta_scale(100.0f, 128);
    for (int round = 0; round < 2; round++) {
        const float pos = round == 0 ? 5.0f : 700.0f;
        for (int k = 0; k < 4; k++) {
            const int normal = (k + round) % 2;
            const float ts = normal ? ts_normal : ts_neox;
            const int64_t half = normal ? 64 : 128;
            krp_tables got, want;
            krp_cache_memo(&got, pos, 1.0f, ts, half, normal);
            krp_cache(&want, pos, 1.0f, ts, half, normal);
            for (int i = 0; i < 128; i++) bad += memcmp(&got.a[i], &want.a[i], 4) != 0 || memcmp(&got.b[i], &want.b[i], 4) != 0;
        }
    }
    return bad + (memcmp(&ts_neox, &ts_normal, 4) != 0 ? 1000 : 0); /* the case needs equal theta_scale bits */
}
"""


def test_rope_table_memo_keys_the_style(tmp_path):
    """One memo for both styles (one translation unit): equal position, theta_scale and width, other style -> the
    table krp_cache makes for that style, never the other's."""
    from kernelmap.build.driver import CompileUnit, build_shared
    from kernelmap.target import target_features

    if not {"avx2", "fma", "f16c"} <= target_features():
        pytest.skip("the probe is built on the AVX2 lanes")
    src = tmp_path / "src"
    src.mkdir()
    (src / "memo_styles.c").write_text(_MEMO_STYLES_C)
    lib = ctypes.CDLL(str(build_shared([CompileUnit(src / "memo_styles.c", ("-mavx2", "-mfma", "-mf16c"))],
                                       name="test_rope_memo_styles", out_dir=tmp_path / "lib")))
    assert lib.km_test_rope_memo_styles() == 0
