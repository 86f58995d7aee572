"""Differential tests of the family ops' kernels (bias_add, rope_ff, swiglu ggml, moe_router/linear/combine,
embedding q4_0, attention_kq): each ref against a NumPy model of its contract built from the C library's
own fmaf/expf/cosf/sinf/powf (ctypes), SIMD variants against ref, the router's argsort against libstdc++'s
std::sort compiled here, and the MoE linear against the dense linear of the same contract.

The peer-tensor tests (llama.cpp's own inputs and outputs) are in test_family_ops_vs_llama.py.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import shutil
import subprocess

import numpy as np
import pytest
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    host_can_run,
    load_map,
    load_map_library,
    map_variants,
    ptr,
    skip_unless_runnable,
)

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
for _n in ("cosf", "sinf", "expf"):
    getattr(_LIBM, _n).argtypes = [ctypes.c_float]
    getattr(_LIBM, _n).restype = ctypes.c_float
_LIBM.powf.argtypes = [ctypes.c_float, ctypes.c_float]
_LIBM.powf.restype = ctypes.c_float
_LIBM.fmaf.argtypes = [ctypes.c_float] * 3
_LIBM.fmaf.restype = ctypes.c_float
_LIBM.ldexpf.argtypes = [ctypes.c_float, ctypes.c_int]
_LIBM.ldexpf.restype = ctypes.c_float
F = np.float32


def fma(a, b, c) -> np.float32:
    return F(_LIBM.fmaf(float(a), float(b), float(c)))


def _run(fn, out_shapes, args_before, nth=1, fill=None, tail=()):
    outs = [guarded(s, d, fill) for s, d in out_shapes]
    for ith in range(nth):
        fn(*[ptr(o) for o, _ in outs], *args_before, *tail, ith, nth)
        for _, check in outs:
            check()
    return [o for o, _ in outs]


# --- bias_add ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", map_variants("bias_add_f32"))
@pytest.mark.parametrize("shape", [(1, 256), (3, 37), (17, 64)])
def test_bias_add_matches_numpy(shape, variant):
    skip_unless_runnable("bias_add_f32", variant)
    lib, spec = load_map_library("bias_add_f32")
    m, n = shape
    rng = np.random.default_rng(m * 100 + n)
    x = rng.standard_normal((m, n)).astype(F) * F(100)
    b = rng.standard_normal(n).astype(F)
    for nth in (1, 2, 3):
        (y,) = _run(bind(lib, spec, variant), [((m, n), F)], [ptr(x), ptr(b), m, n], nth)
        assert_close_or_equal((x + b).astype(F), y, map_id="bias_add_f32", variant=variant, context=f"{shape} nth={nth}")


# --- rope with frequency factors ---------------------------------------------------------------------------

def _rope_ff_numpy(x, f, h, d, pos, base, fscale, normal):
    ts = F(_LIBM.powf(F(base), F(-2.0) / F(d)))
    y = np.empty_like(x)
    for r in range(x.shape[0]):
        theta = F(pos + r)
        cs, sn = np.empty(d // 2, F), np.empty(d // 2, F)
        for i in range(d // 2):
            t = F(F(fscale) * F(theta / f[i]))
            cs[i], sn[i] = _LIBM.cosf(t), _LIBM.sinf(t)
            theta = F(theta * ts)
        heads = x[r].reshape(h, d)
        out = np.empty((h, d), F)
        for hh in range(h):
            for i in range(d // 2):
                a, b = (2 * i, 2 * i + 1) if normal else (i, i + d // 2)
                x0, x1 = heads[hh, a], heads[hh, b]
                out[hh, a] = fma(x0, cs[i], -F(x1 * sn[i]))
                out[hh, b] = fma(x0, sn[i], F(x1 * cs[i]))
        y[r] = out.reshape(-1)
    return y


@pytest.mark.parametrize("map_id,style,variant", [(m, st, v) for m, st in (("rope_ff_normal_f32", "normal"), ("rope_ff_neox_f32", "neox")) for v in map_variants(m)])
def test_rope_ff_matches_numpy_steps(map_id, style, variant):
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    rng = np.random.default_rng(7)
    m, h, d, pos = 3, 2, 64, 1234
    x = rng.standard_normal((m, h * d)).astype(F)
    f = np.where(rng.random(d // 2) < 0.5, F(1.0), rng.uniform(1, 32, d // 2).astype(F)).astype(F)
    want = _rope_ff_numpy(x, f, h, d, pos, 500000.0, 0.25, style == "normal")
    for nth in (1, 3):
        (y,) = _run(bind(lib, spec, variant), [((m, h * d), F)], [ptr(x), ptr(f), m, h, d, pos,
                                                                ctypes.c_float(500000.0), ctypes.c_float(0.25)], nth)
        assert_close_or_equal(want, y, map_id=spec["id"], variant=variant, context=f"nth={nth}")


@pytest.mark.parametrize("map_id,style,variant", [(m, st, v) for m, st in (("rope_ff_normal_f32", "normal"), ("rope_ff_neox_f32", "neox")) for v in map_variants(m)])
def test_rope_ff_with_unit_factors_equals_plain_rope(map_id, style, variant):
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    plib, pspec = load_map_library(f"rope_{style}_f32")
    rng = np.random.default_rng(3)
    m, h, d, pos = 4, 3, 128, 77
    x = rng.standard_normal((m, h * d)).astype(F) * F(4)
    f = np.ones(d // 2, F)
    base, fs = ctypes.c_float(1e6), ctypes.c_float(1.0)
    (want,) = _run(bind(plib, pspec, "ref"), [((m, h * d), F)], [ptr(x), m, h, d, pos, base, fs])
    (got,) = _run(bind(lib, spec, variant), [((m, h * d), F)], [ptr(x), ptr(f), m, h, d, pos, base, fs])
    assert_close_or_equal(want, got, map_id=spec["id"], variant=variant, context="f = 1 vs rope")


@pytest.mark.parametrize("map_id,variant", [(m, v) for m in ("rope_ff_normal_f32", "rope_ff_neox_f32")
                                             for v in map_variants(m, ref=False)])
def test_rope_ff_variants_match_ref(map_id, variant):
    """Each SIMD variant (rope/rope_ff_body.h) returns the ref's bytes: head sizes with and without a partial
    vector (D = 2, 6, 20, 64, 136, 512), rows whose items split across threads (nth 1..5), factors that
    underflow/overflow t, and y aliasing x."""
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    rng = np.random.default_rng(31)
    for m, h, d, pos in ((1, 1, 2, 0), (3, 5, 6, 9), (2, 3, 20, 4000), (4, 2, 64, 77), (3, 3, 136, 123456), (2, 2, 512, 31)):
        x = (rng.standard_normal((m, h * d)) * 3).astype(F)
        f = rng.choice(np.array([1.0, 0.5, 8.0, 1e-30, 1e30, 40.0], F), d // 2).astype(F)
        args = [ptr(x), ptr(f), m, h, d, pos, ctypes.c_float(10000.0), ctypes.c_float(0.5)]
        (want,) = _run(bind(lib, spec, "ref"), [((m, h * d), F)], args)
        for nth in (1, 2, 3, 5):
            (got,) = _run(bind(lib, spec, variant), [((m, h * d), F)], args, nth)
            assert_close_or_equal(want, got, map_id=map_id, variant=variant, context=f"{m}x{h}x{d} nth={nth}")
        inplace = x.copy()
        bind(lib, spec, variant)(ptr(inplace), ptr(inplace), *args[1:], 0, 1)
        assert_close_or_equal(want, inplace, map_id=map_id, variant=variant, context=f"{m}x{h}x{d} in place")


# --- SwiGLU in ggml's order ----------------------------------------------------------------------------------

def ggml_v_expf(x) -> np.float32:
    """One lane of ggml_v_expf (AVX-512), from libm fmaf and ldexpf."""
    x = F(x)
    r = F(float.fromhex("0x1.8p23"))
    z = fma(x, F(float.fromhex("0x1.715476p+0")), r)
    n = F(z - r)
    if math.isnan(n):
        return n
    b = fma(-n, F(float.fromhex("0x1.7f7d1cp-20")), fma(-n, F(float.fromhex("0x1.62e4p-1")), x))
    u = F(b * b)
    j = fma(fma(fma(F(float.fromhex("0x1.0e4020p-7")), b, F(float.fromhex("0x1.573e2ep-5"))), u, fma(F(float.fromhex("0x1.555e66p-3")), b, F(float.fromhex("0x1.fffdb6p-2")))),
            u, fma(F(float.fromhex("0x1.ffffecp-1")), b, F(1.0)))
    if abs(n) > 192:
        return F(0.0) if n <= 0 else F(np.inf)
    return F(_LIBM.ldexpf(float(j), int(n)))


def _bits_f32(u: int) -> np.float32:
    return np.array([u & 0xFFFFFFFF], np.uint32).view(F)[0]


def ggml_v_expf8(x) -> np.float32:
    """One lane of ggml_v_expf in llama.cpp's AVX2 build: the same reduction, the polynomial without its 1, then
    fma(j, k, k) with k = 2^n from z's bits (|n| <= 126), the two-factor scaling to 192, s1 * s1 beyond."""
    x = F(x)
    r = F(float.fromhex("0x1.8p23"))
    z = fma(x, F(float.fromhex("0x1.715476p+0")), r)
    n = F(z - r)
    b = fma(-n, F(float.fromhex("0x1.7f7d1cp-20")), fma(-n, F(float.fromhex("0x1.62e4p-1")), x))
    e = (int(np.array([z], F).view(np.uint32)[0]) << 23) & 0xFFFFFFFF
    k = _bits_f32(e + 0x3F800000)
    u = F(b * b)
    j = fma(fma(fma(F(float.fromhex("0x1.0e4020p-7")), b, F(float.fromhex("0x1.573e2ep-5"))), u,
                fma(F(float.fromhex("0x1.555e66p-3")), b, F(float.fromhex("0x1.fffdb6p-2")))),
            u, F(F(float.fromhex("0x1.ffffecp-1")) * b))
    if not abs(n) > 126:
        return fma(j, k, k)
    g = 0x82000000 if n <= 0 else 0
    s1, s2 = _bits_f32(g + 0x7F000000), _bits_f32(e - g)
    if abs(n) > 192:
        return F(s1 * s1)
    return F(fma(s2, j, s2) * s1)


# map id -> (vector width of the peer build, one-lane exp of that build)
SWIGLU_MAPS = {"swiglu_f32_ggml": (16, ggml_v_expf), "swiglu_f32_ggml_exp8": (8, ggml_v_expf8)}
SWIGLU_VARIANTS = [(m, v) for m in SWIGLU_MAPS for v in map_variants(m)]


def _silu_lane(x, expf=ggml_v_expf):
    return F(F(x) / F(F(1.0) + expf(F(F(0.0) - F(x)))))


def _silu_tail(x):
    return F(F(x) / F(F(1.0) + F(_LIBM.expf(float(-F(x))))))


@pytest.mark.parametrize("map_id,variant", SWIGLU_VARIANTS)
def test_swiglu_ggml_matches_numpy_lane_model(map_id, variant):
    """swiglu.f32.ggml.v1 (AVX-512 build: 16 lanes) and swiglu.f32.ggml_exp8.v1 (AVX2 build: 8 lanes, its exp)
    against the NumPy lane model of that build, vector columns and scalar tail, exp's every range."""
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    width, expf = SWIGLU_MAPS[map_id]
    rng = np.random.default_rng(5)
    m, n = 3, 37  # columns below 32 (the 16-lane build) / 32 (the 8-lane build) take the vector lane, then the tail
    gate = (rng.standard_normal((m, n)) * 6).astype(F)
    gate[0, :8] = [0.0, -0.0, 88.0, -88.0, 120.0, -120.0, 1e-30, np.nan]
    gate[2, :12] = [87.5, -87.5, 100.0, -100.0, 130.0, -130.0, 150.0, -150.0, 200.0, -200.0, 103.0, -103.0]
    gate[1, 32:] = [0.0, -104.0, 89.0, np.inf, -np.inf]
    up = rng.standard_normal((m, n)).astype(F)
    want = np.empty_like(gate)
    with np.errstate(all="ignore"):
        for i in range(m):
            for j in range(n):
                s = _silu_lane(gate[i, j], expf) if j < n - n % width else _silu_tail(gate[i, j])
                want[i, j] = F(s * up[i, j])
    for nth in (1, 2, 4):
        with np.errstate(all="ignore"):
            (y,) = _run(bind(lib, spec, variant), [((m, n), F)], [ptr(gate), ptr(up), m, n], nth)
        assert_close_or_equal(want, y, map_id=map_id, variant=variant, context=f"nth={nth}")


@pytest.mark.parametrize("map_id,variant", [(m, v) for m, v in SWIGLU_VARIANTS if v != "ref"])
def test_swiglu_ggml_variants_byte_identical_to_ref(map_id, variant):
    """Every SIMD variant of swiglu.f32.ggml.v1 / ggml_exp8.v1 returns its ref's bytes: exp underflow to subnormals
    and to 0, overflow, |n| > 126 and > 192, NaN, infinities, signed zeros; row lengths with and without a scalar
    tail, rows that start inside another thread's chunk, nth 1..5, and y aliasing gate."""
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    rng = np.random.default_rng(23)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, -1e30, 80.0, -80.0, 87.0, -87.0,
                        88.7, -88.7, 89.0, -89.0, 100.0, -100.0, 103.9, -103.9, 104.0, -104.0, 110.0, -110.0,
                        133.0, -133.0, 150.0, -150.0, 192.0, -192.0, 300.0, -300.0], F)
    for m, n in ((1, 16), (3, 37), (2, 64), (4, 100), (5, 7), (3, 320), (1, 1536)):
        gate = (rng.standard_normal((m, n)) * rng.choice([1.0, 8.0, 60.0], (m, n))).astype(F)
        flat = gate.reshape(-1)
        k = min(len(special), flat.size)
        flat[rng.choice(flat.size, k, replace=False)] = special[:k]
        flat[: min(flat.size, 40)] = np.linspace(-110.0, 110.0, min(flat.size, 40)).astype(F)
        up = rng.standard_normal((m, n)).astype(F)
        with np.errstate(all="ignore"):
            (want,) = _run(bind(lib, spec, "ref"), [((m, n), F)], [ptr(gate), ptr(up), m, n])
            for nth in (1, 2, 3, 5):
                (got,) = _run(bind(lib, spec, variant), [((m, n), F)], [ptr(gate), ptr(up), m, n], nth)
                bad = np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))
                assert bad.size == 0, (f"{map_id} [{variant}] {m}x{n} nth={nth}: {bad.size} differing; first at "
                                       f"{bad[:5].tolist()}: gate {flat[bad[:5]].tolist()} want {want.reshape(-1)[bad[:5]].tolist()} "
                                       f"got {got.reshape(-1)[bad[:5]].tolist()}")
            inplace = gate.copy()
            bind(lib, spec, variant)(ptr(inplace), ptr(inplace), ptr(up), m, n, 0, 1)
            assert np.array_equal(inplace.view(np.uint32), want.view(np.uint32)), f"{map_id} [{variant}] in place {m}x{n}"


# --- MoE router -----------------------------------------------------------------------------------------------

def _reduce16(a):
    h = [F(a[i + 8] + a[i]) for i in range(8)]
    q = [F(h[i + 4] + h[i]) for i in range(4)]
    return F(F(q[0] + q[2]) + F(q[1] + q[3]))


def _dot_f32(w, x):
    acc = [[F(0.0)] * 16 for _ in range(4)]
    for i in range(0, len(x), 64):
        for j in range(4):
            for lane in range(16):
                acc[j][lane] = fma(w[i + 16 * j + lane], x[i + 16 * j + lane], acc[j][lane])
    a0 = [F(F(acc[0][lane] + acc[2][lane]) + F(acc[1][lane] + acc[3][lane])) for lane in range(16)]
    return _reduce16(a0)


def _reduce8(a):
    h = [F(a[i + 4] + a[i]) for i in range(4)]
    return F(F(h[0] + h[2]) + F(h[1] + h[3]))


def _dot32_f32(w, x):
    """ggml_vec_dot_f32 of the AVX2 build (K a multiple of 32): 32 partials, (a0 + a2) + (a1 + a3), l + 4, pairs."""
    p = [F(0.0)] * 32
    for i in range(len(x)):
        p[i % 32] = fma(w[i], x[i], p[i % 32])
    v = [F(F(p[lane] + p[16 + lane]) + F(p[8 + lane] + p[24 + lane])) for lane in range(8)]
    t = [F(v[lane] + v[lane + 4]) for lane in range(4)]
    return F(F(t[0] + t[1]) + F(t[2] + t[3]))


# map id -> (logit dot, softmax block width, block exp, block lane sum) of the llama.cpp build it reproduces
ROUTER_MAPS = {"moe_router_f32": (_dot_f32, 16, ggml_v_expf, _reduce16),
               "moe_router_f32_ggml_dot32": (_dot32_f32, 8, ggml_v_expf8, _reduce8)}


def _router_numpy(x, w, u, norm, scale, map_id="moe_router_f32"):
    dot, width, vexpf, vsum = ROUTER_MAPS[map_id]
    e = w.shape[0]
    logits = [dot(w[k], x) for k in range(e)]
    mx = F(-np.inf)
    for v in logits:
        mx = mx if mx > v else v
    p = [F(0.0)] * e
    total = 0.0
    vec_end = e - e % width
    for b in range(0, vec_end, width):
        for k in range(b, b + width):
            p[k] = vexpf(F(logits[k] - mx))
        total += float(vsum(p[b:b + width]))
    for k in range(vec_end, e):
        p[k] = F(_LIBM.expf(float(F(logits[k] - mx))))
        total += float(p[k])
    inv = F(1.0 / total)
    p = np.array([F(v * inv) for v in p], F)
    order = np.argsort(-p, kind="stable")[:u]  # no ties in these inputs
    wts = p[order].copy()
    if norm:
        s = F(sum(float(v) for v in wts))
        s = max(s, F(6.103515625e-5))
        wts = np.array([F(v / s) for v in wts], F)
    if scale not in (0.0, 1.0):
        wts = (wts * F(scale)).astype(F)
    return order.astype(np.int32), wts


@pytest.mark.parametrize("map_id,variant", [(m, v) for m in ROUTER_MAPS for v in map_variants(m)])
@pytest.mark.parametrize("e,u,norm,scale", [(4, 2, 1, 0.0), (32, 4, 1, 0.0), (40, 8, 0, 2.5), (13, 3, 1, 0.0)])
def test_moe_router_matches_numpy_steps(e, u, norm, scale, map_id, variant):
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    rng = np.random.default_rng(e * 10 + u)
    m, k = 3, 128
    x = rng.standard_normal((m, k)).astype(F)
    w = (rng.standard_normal((e, k)) / 8).astype(F)
    for nth in (1, 2):
        ids, wts = _run(bind(lib, spec, variant), [((m, u), np.int32), ((m, u), F)],
                        [ptr(x), ptr(w), m, e, u, k, norm, ctypes.c_float(scale)], nth, fill=0)
        for r in range(m):
            want_ids, want_w = _router_numpy(x[r], w, u, norm, scale, map_id)
            assert ids[r].tolist() == want_ids.tolist(), f"{map_id} [{variant}] row {r}: ids {ids[r]} != {want_ids}"
            assert_close_or_equal(want_w, wts[r], map_id=map_id, variant=variant, context=f"row {r} nth={nth}")


@pytest.mark.parametrize("map_id,variant", [(m, v) for m in ROUTER_MAPS for v in map_variants(m, ref=False)])
def test_moe_router_variants_match_ref(map_id, variant):
    """Each SIMD variant (moe/router_body.h) returns the ref's ids and weight bytes: E with and without a
    partial block of 16, E = 512, K = 64 .. 2048, tied logits (equal expert rows), norm/scale on and off,
    nth 1..3 over 1..5 rows."""
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    rng = np.random.default_rng(41)
    for m, e, u, k, norm, scale in ((1, 4, 2, 64, 1, 0.0), (5, 37, 8, 192, 0, 2.5), (3, 64, 8, 1024, 1, 1.0),
                                    (2, 512, 16, 128, 1, 0.5), (4, 20, 4, 2048, 0, 0.0)):
        x = rng.standard_normal((m, k)).astype(F)
        w = (rng.standard_normal((e, k)) / 8).astype(F)
        w[1::5] = w[0]  # ties: equal logits
        args = [ptr(x), ptr(w), m, e, u, k, norm, ctypes.c_float(scale)]
        want_ids, want_w = _run(bind(lib, spec, "ref"), [((m, u), np.int32), ((m, u), F)], args, fill=0)
        for nth in (1, 2, 3):
            ids, wts = _run(bind(lib, spec, variant), [((m, u), np.int32), ((m, u), F)], args, nth, fill=0)
            assert ids.tolist() == want_ids.tolist(), f"{map_id} [{variant}] {m}x{e}x{k} nth={nth}: ids differ"
            assert_close_or_equal(want_w, wts, map_id=map_id, variant=variant, context=f"{m}x{e}x{k} nth={nth}")


_SORT_CPP = r"""
#include <algorithm>
#include <cstdio>
#include <vector>
int main() {
    int n;
    while (std::scanf("%d", &n) == 1) {
        std::vector<float> v(n);
        std::vector<int> idx(n);
        for (int i = 0; i < n; i++) { std::scanf("%f", &v[i]); idx[i] = i; }
        std::sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
        for (int i = 0; i < n; i++) std::printf("%d ", idx[i]);
        std::printf("\n");
    }
}
"""
_SORT_C = r"""
#include "../moe/router_sort.h"
void km_test_argsort(int32_t *idx, const float *v, int64_t n) { km_argsort_desc(idx, v, n); }
"""


def test_router_sort_matches_libstdcxx_std_sort(tmp_path):
    """Ties included: the router's argsort leaves equal probabilities where std::sort (llama.cpp's) does."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to build the std::sort oracle")
    (tmp_path / "sort.cpp").write_text(_SORT_CPP)
    subprocess.run([cxx, "-O2", "-o", str(tmp_path / "sort"), str(tmp_path / "sort.cpp")], check=True)
    tmp_src = tmp_path / "moe_shim"
    tmp_src.mkdir()
    (tmp_src / "shim.c").write_text(_SORT_C.replace("../moe/router_sort.h", str(KERNEL_ROOT / "moe" / "router_sort.h")))
    lib = ctypes.CDLL(str(build_shared([CompileUnit(tmp_src / "shim.c")], name="test_argsort", out_dir=tmp_path / "lib")))
    fn = lib.km_test_argsort
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    rng = np.random.default_rng(11)
    cases = []
    for n in list(range(1, 40)) + [64, 100, 128, 129, 200, 256, 512]:
        for kind in range(3):
            if kind == 0:
                v = rng.integers(0, 3, n).astype(F)          # many ties
            elif kind == 1:
                v = rng.standard_normal(n).astype(F)
            else:
                v = np.sort(rng.integers(0, 5, n).astype(F))   # sorted runs with ties (pivot stress)
            cases.append(v)
    text = "".join(f"{len(v)} " + " ".join(repr(float(x)) for x in v) + "\n" for v in cases)
    out = subprocess.run([str(tmp_path / "sort")], input=text, capture_output=True, text=True, check=True).stdout
    for v, line in zip(cases, out.splitlines(), strict=True):
        want = [int(t) for t in line.split()]
        idx = np.zeros(len(v), np.int32)
        fn(ptr(idx), ptr(v), len(v))
        assert idx.tolist() == want, f"n={len(v)} values={v.tolist()[:20]}... got {idx.tolist()[:20]} want {want[:20]}"


# --- MoE linear and combine -----------------------------------------------------------------------------------

_BLOCKS = {"q8_0": (32, 34), "q5_0": (32, 22), "q4_0": (32, 18), "q4_k": (256, 144), "q6_k": (256, 210)}
_MOE_MAPS = {"q8_0": ("moe_linear_q8_0_q8_0_ggml", "linear_q8_0_q8_0_ggml", "q8_0"),
             "q5_0": ("moe_linear_q5_0_q8_0_ggml", "linear_q5_0_q8_0_ggml", "q8_0"),
             "q4_k": ("moe_linear_q4_k_q8_k_ggml", "linear_q4_k_q8_k_ggml", "q8_k"),
             "q6_k": ("moe_linear_q6_k_q8_k_ggml", "linear_q6_k_q8_k_ggml", "q8_k"),
             "q4_0": ("moe_linear_q4_0_q8_0", "linear_q4_0_q8_0", "q8_0"),
             "q4_0_ggml": ("moe_linear_q4_0_q8_0_ggml", "linear_q4_0_q8_0_ggml", "q8_0")}


def _quant_weights(wtype, e, n, k, rng):
    import gguf

    x = (rng.standard_normal((e * n, k)) / math.sqrt(k)).astype(F)
    if wtype in ("q8_0", "q5_0", "q4_0"):
        return gguf.quants.quantize(x, getattr(gguf.GGMLQuantizationType, wtype.upper())).reshape(-1)
    # k-quants: random blocks with legal headers (the kernels accept any bit pattern; scales kept small)
    bs, nbytes = _BLOCKS[wtype]
    raw = rng.integers(0, 256, (e * n, k // bs, nbytes), dtype=np.uint8)
    d = np.float16(0.01).view(np.uint16)
    if wtype == "q4_k":
        raw[..., 0:2] = np.frombuffer(np.uint16(d).tobytes(), np.uint8)
        raw[..., 2:4] = np.frombuffer(np.uint16(d).tobytes(), np.uint8)
    else:
        raw[..., 208:210] = np.frombuffer(np.uint16(d).tobytes(), np.uint8)
    return raw.reshape(-1)


def _quant_act(act, x):
    map_id = {"q8_0": "quantize_act_q8_0_rne", "q8_k": "quantize_act_q8_k"}[act]
    lib, spec = load_map_library(map_id)
    fn = bind(lib, spec, "ref")
    m, k = x.shape
    bs, nbytes = {"q8_0": (32, 34), "q8_k": (256, 292)}[act]
    y = np.zeros(m * (k // bs) * nbytes, np.uint8)
    xc = np.ascontiguousarray(x, F)
    fn(ptr(y), ptr(xc), m, k, 0, 1)
    return y


def _variant_lib(map_id: str, names: list[str]):
    """A library of only the named variants of a map (the q8_0/q5_0 bodies take ~30 s each to compile)."""
    spec = load_map(map_id)
    units = [CompileUnit(KERNEL_ROOT / v["source"], tuple(v["cflags"])) for v in spec["variants"] if v["name"] in names]
    return ctypes.CDLL(str(build_shared(units, name=f"test_{map_id}_{'_'.join(sorted(names))}"))), spec


def _top_variant(spec) -> str:
    return max((v for v in spec["variants"] if host_can_run(v["requires"])[0]), key=lambda v: v["priority"])["name"]


@pytest.mark.parametrize("wtype", [w for w in sorted(_MOE_MAPS) if "ref" in map_variants(_MOE_MAPS[w][0])])
@pytest.mark.parametrize("xs", [1, 2])
def test_moe_linear_rows_equal_dense_linear(wtype, xs):
    """Row (m, u) of the MoE linear equals the dense linear (same contract, ref) of expert ids[m][u]."""
    moe_id, dense_id, act = _MOE_MAPS[wtype]
    lib, spec = _variant_lib(moe_id, ["ref"])
    dlib, dspec = _variant_lib(dense_id, ["ref"])
    rng = np.random.default_rng(len(wtype) + xs)
    e, u, m, k = 5, 2, 3, 256
    for n in (24, 20):  # q4_0 in llama.cpp's order: a multiple of 8 rows is the repacked order, 20 the vec_dot one
        w = _quant_weights(wtype.removesuffix("_ggml"), e, n, k, rng)
        x = rng.standard_normal((m * (xs if xs == 1 else u), k)).astype(F)
        xq = _quant_act(act, x)
        ids = np.array([[4, 1], [1, 0], [3, 4]], np.int32)
        (y,) = _run(bind(lib, spec, "ref"), [((m, u * n), F)],
                    [ptr(w), ptr(xq), ptr(ids), m, u, xs if xs == 1 else u, e, n, k])
        wrow = w.size // (e * n)
        xrow = xq.size // x.shape[0]
        dense = bind(dlib, dspec, "ref")
        for r in range(m * u):
            ex, xr = int(ids.reshape(-1)[r]), (r // u if xs == 1 else r)
            we = np.ascontiguousarray(w[ex * n * wrow:(ex + 1) * n * wrow])
            xe = np.ascontiguousarray(xq[xr * xrow:(xr + 1) * xrow])
            want = np.zeros(n, F)
            dense(ptr(want), ptr(we), ptr(xe), 1, n, k, 0, 1)
            assert_close_or_equal(want, y.reshape(m * u, n)[r], map_id=moe_id, variant="ref", context=f"n={n} row {r}")


def _moe_variant_params() -> list:
    """(wtype, variant) of every MoE linear variant: the host's top variant of each map in `make test`, the others
    marked slow (`make test-slow`: each variant library includes a dense linear body, ~30 s of compiling apiece).
    A marker, not an environment check inside the test: `make test-slow` selects `-m slow`, so a test that only
    skipped itself without KERNELMAP_SLOW=1 ran in neither suite."""
    out = []
    for w in sorted(_MOE_MAPS):
        moe_id = _MOE_MAPS[w][0]
        top = _top_variant(load_map(moe_id))
        for v in map_variants(moe_id, ref=False):
            out.append((w, v) if v == top else pytest.param(w, v, marks=pytest.mark.slow))
    return out


@pytest.mark.parametrize("wtype,variant", _moe_variant_params())
def test_moe_linear_variants_match_ref(wtype, variant):
    """Each variant (expert panels, linear/moe_rows.h km_moe_panels) == ref (one M = 1 call per row) for xs = 1
    and u, nth 1..3: experts with 1 row (straight into y) and with more rows than one panel holds (over
    32: two panels), column blocks (N = 136: 64 + 64 + 8) and N % 8 != 0 (one block), an id outside [0, E)
    (row left untouched), and the 256 claimed pieces of a split op. `make test` runs the host's top variant of
    each map, `make test-slow` the others (_moe_variant_params)."""
    moe_id, _, act = _MOE_MAPS[wtype]
    skip_unless_runnable(moe_id, variant)
    lib, spec = _variant_lib(moe_id, sorted({"ref", variant}))
    rng = np.random.default_rng(100 + len(wtype))
    e, u, k = 6, 3, 512
    small = rng.integers(0, e, (5, u)).astype(np.int32)
    skew = np.where(rng.random((16, u)) < 0.85, 2, rng.integers(0, e, (16, u))).astype(np.int32)
    skew[3, 2], skew[7, 0] = -1, e  # never read as an expert
    assert (skew == 2).sum() > 32, "expert 2 must fill more than one panel"
    for ids, ns, nths in ((small, (40, 36), (1, 2, 3)), (skew, (136, 36), (1, 2, 3, 256))):
        m = ids.shape[0]
        for n in ns:  # q4_0 in llama.cpp's order: both of its orders (N a multiple of 8 or not)
            w = _quant_weights(wtype.removesuffix("_ggml"), e, n, k, rng)
            for xs in (1, u):
                x = rng.standard_normal((m * xs, k)).astype(F)
                xq = _quant_act(act, x)
                args = [ptr(w), ptr(xq), ptr(ids), m, u, xs, e, n, k]
                (want,) = _run(bind(lib, spec, "ref"), [((m, u * n), F)], args)
                for nth in nths:
                    (got,) = _run(bind(lib, spec, variant), [((m, u * n), F)], args, nth)
                    assert_close_or_equal(want, got, map_id=moe_id, variant=variant,
                                          context=f"m={m} n={n} xs={xs} nth={nth}")


@pytest.mark.parametrize("variant", map_variants("moe_combine_f32"))
def test_moe_combine_matches_numpy(variant):
    skip_unless_runnable("moe_combine_f32", variant)
    lib, spec = load_map_library("moe_combine_f32")
    rng = np.random.default_rng(9)
    for m, u, n in ((1, 1, 64), (3, 4, 37), (2, 8, 256)):
        x = rng.standard_normal((m, u * n)).astype(F)
        w = rng.random((m, u)).astype(F)
        want = np.empty((m, n), F)
        for r in range(m):
            acc = (x[r, :n] * w[r, 0]).astype(F)
            for s in range(1, u):
                acc = (acc + (x[r, s * n:(s + 1) * n] * w[r, s]).astype(F)).astype(F)
            want[r] = acc
        for nth in (1, 3):
            (y,) = _run(bind(lib, spec, variant), [((m, n), F)], [ptr(x), ptr(w), m, u, n], nth)
            assert_close_or_equal(want, y, map_id="moe_combine_f32", variant=variant, context=f"{m}x{u}x{n} nth={nth}")


# --- embedding q4_0 -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", map_variants("embedding_q4_0"))
def test_embedding_q4_0_matches_gguf_dequantize(variant):
    import gguf

    skip_unless_runnable("embedding_q4_0", variant)
    lib, spec = load_map_library("embedding_q4_0")
    rng = np.random.default_rng(2)
    v, d = 40, 96
    table = gguf.quants.quantize(rng.standard_normal((v, d)).astype(F), gguf.GGMLQuantizationType.Q4_0)
    deq = gguf.quants.dequantize(table, gguf.GGMLQuantizationType.Q4_0).astype(F)
    ids = np.array([0, 39, 7, 7, 21], np.int32)
    flat = np.ascontiguousarray(table.reshape(-1))
    for scale in (1.0, 0.5):
        (y,) = _run(bind(lib, spec, variant), [((len(ids), d), F)], [ptr(flat), ptr(ids), len(ids), v, d,
                                                                   ctypes.c_float(scale)], 2)
        assert_close_or_equal((deq[ids] * F(scale)).astype(F), y, map_id="embedding_q4_0", variant=variant,
                              context=f"scale={scale}")


# --- attention with kq_scale ----------------------------------------------------------------------------------

# attention_kq map -> the attention map of the same build's score dot
_KQ_PAIRS = {"attention_kq_f16kv_ggmlfa": "attention_f16kv_ggmlfa",
             "attention_kq_f16kv_ggmlfa_dot32": "attention_f16kv_ggmlfa_dot32"}


@pytest.mark.parametrize("kq_map,variant", [(k, v) for k in _KQ_PAIRS for v in map_variants(k)])
@pytest.mark.parametrize("d,scale_exp", [(64, -3), (128, -4), (96, -2)])
def test_attention_kq_equals_ggmlfa_when_q_is_prescaled(d, scale_exp, kq_map, variant):
    """With q already f16 and a power-of-two scale (no f16 subnormals), scaling q before its f16 rounding
    (attention.f16kv.ggml_fa.v1 / _dot32.v1) and scaling each score (attention_kq, the same build's dot) give the
    same bits."""
    skip_unless_runnable(kq_map, variant)
    lib, spec = load_map_library(kq_map)
    glib, gspec = load_map_library(_KQ_PAIRS[kq_map])
    rng = np.random.default_rng(d)
    m, hq, hkv, c, pos = 3, 4, 2, 40, 20
    q = rng.uniform(0.5, 2.0, (m, hq * d)).astype(np.float16).astype(F) * rng.choice([-1, 1], (m, hq * d)).astype(F)
    kc = rng.standard_normal((hkv, c, d)).astype(np.float16)
    vc = rng.standard_normal((hkv, c, d)).astype(np.float16)
    scale = ctypes.c_float(2.0 ** scale_exp)
    for window in (0, 7):
        args = [ptr(q), ptr(kc), ptr(vc), m, hq, hkv, d, c, pos, scale, window]
        (want,) = _run(bind(glib, gspec, "ref"), [((m, hq * d), F)], args)
        for nth in (1, 2):
            (got,) = _run(bind(lib, spec, variant), [((m, hq * d), F)], args, nth)
            assert_close_or_equal(want, got, map_id=spec["id"], variant=variant, context=f"D={d} window={window} nth={nth}")
