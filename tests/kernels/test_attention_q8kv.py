"""The q8_0 KV cache: kv_append_q8_0 and attention over q8_0 K/V (attention_q8_0kv_ggmlfa, attention_kq_q8_0kv_ggmlfa).

Refs against ggml itself (tests/fixtures/llama_ops/kvq8.npz, made by tests/fixtures/make_kvq8_op_fixtures.py
with llama.cpp 0.3.36's ggml_set_rows into GGML_TYPE_Q8_0 and ggml_flash_attn_ext over q8_0 K and V, plain and
with the Hadamard rotations llama.cpp's graph puts around a quantized cache): the KV bytes and every attention
output bit for bit. Every SIMD variant byte-identical with its ref for every
(ith, nth) and row count; cells a kernel must not read hold blocks whose scale is an f16 NaN, so reading one
shows. The ring layout (window + rows - 1 cells) gives the full-length layout's bits.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from kernel_harness import (
    assert_close_or_equal,
    bind,
    guarded,
    load_map_library,
    map_variants,
    ptr,
    run_partitioned,
    skip_unless_runnable,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OPS = FIXTURES / "llama_ops"
APPEND = "kv_append_q8_0"
APPENDS = {"plain": APPEND, "rot_k": "kv_append_q8_0_rotk", "rot_v": "kv_append_q8_0_rotv"}
ATTN = {"q": "attention_q8_0kv_ggmlfa", "kq": "attention_kq_q8_0kv_ggmlfa",
        "q_rot": "attention_q8_0kv_rot_ggmlfa", "kq_rot": "attention_kq_q8_0kv_rot_ggmlfa"}
BLOCK = 34  # bytes of a q8_0 block (f16 d + 32 int8)
NAN_BLOCK_D = 0x7E00  # an f16 NaN scale: a block no kernel may read

# name: (M, Hq, Hkv, D, pos, window, scale): rows pos .. pos+M-1 over keys 0 .. pos+M-1
CASES = {
    "decode_gemma": (1, 4, 1, 256, 200, 0, 0.0625),
    "decode_window": (1, 4, 1, 256, 200, 64, 0.0625),
    "decode_pos0": (1, 4, 1, 256, 0, 0, 0.0625),
    "prefill_pos0_gqa4": (40, 4, 1, 256, 0, 0, 0.0625),
    "prefill_window": (17, 4, 1, 256, 20, 16, 0.0625),
    "window1": (3, 2, 2, 64, 10, 1, 0.125),
    "gqa3_hkv2_d128": (4, 6, 2, 128, 40, 0, 0.1),
    "d32": (5, 4, 2, 32, 33, 7, 0.25),
    "d96": (4, 3, 3, 96, 9, 0, 0.102),
    "d512": (2, 8, 2, 512, 10, 0, 0.0441941738),
    "gqa8_rows": (9, 8, 1, 64, 60, 0, 0.125),
}
NTH = (1, 2, 3, 5)


def _fixture_module():
    spec = importlib.util.spec_from_file_location("make_kvq8_op_fixtures", FIXTURES / "make_kvq8_op_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ggml():
    doc = json.loads((OPS / "kvq8.json").read_text(encoding="utf-8"))
    with np.load(OPS / "kvq8.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return _fixture_module(), doc, arrays


def _append(fn, x: np.ndarray, h: int, d: int, c: int, pos: int, cache: np.ndarray, nth: int = 1) -> None:
    """Rows of x f32 [M, H*D] at positions pos .. into cache uint8 [H, C, D/32*34]."""
    run_partitioned(fn, (ptr(cache), ptr(np.ascontiguousarray(x)), x.shape[0], h, d, c, pos), nth)


def _poisoned(h: int, c: int, d: int) -> np.ndarray:
    """A q8_0 cache [H, C, D/32*34] whose every block has an f16 NaN scale (a read of an unwritten cell shows)."""
    cache = np.zeros((h, c, d // 32, BLOCK), np.uint8)
    cache[..., 0:2] = np.frombuffer(np.uint16(NAN_BLOCK_D).tobytes(), np.uint8)
    return cache.reshape(h, c, d // 32 * BLOCK)


def _attend(fn, q, kc, vc, m, hq, hkv, d, c, pos, scale, window, nth, threaded=False) -> np.ndarray:
    y, check = guarded((m, hq * d), np.float32)
    run_partitioned(fn, (ptr(y), ptr(q), ptr(kc), ptr(vc), m, hq, hkv, d, c, pos, scale, window), nth,
                    threaded=threaded)
    check()
    return y.copy()


def _case_inputs(case: str):
    m, hq, hkv, d, pos, _window, _scale = CASES[case]
    rng = np.random.default_rng([7, sorted(CASES).index(case)])
    n = pos + m
    mag = np.exp(rng.uniform(-3.0, 3.0, size=(2, n, hkv, 1))).astype(np.float32)
    kv = (rng.standard_normal((2, n, hkv, d)).astype(np.float32) * mag).reshape(2, n, hkv * d)
    kv[:, n // 2, :32] = 0.0  # an all-zero block
    q = (rng.standard_normal((m, hq * d)) * 4.0).astype(np.float32)
    return q, kv[0].copy(), kv[1].copy()


def _caches(append_fn, k, v, hkv, d, c):
    kc, vc = _poisoned(hkv, c, d), _poisoned(hkv, c, d)
    _append(append_fn, k, hkv, d, c, 0, kc)
    _append(append_fn, v, hkv, d, c, 0, vc)
    return kc, vc


# ---- the refs against ggml ----

@pytest.mark.parametrize("rotated", [False, True], ids=["plain", "rotated"])
def test_kv_append_q8_0_ref_equals_ggml_set_rows(ggml, rotated):
    """Plain: ggml_set_rows into q8_0; rotated: llama.cpp's graph (fwht of K by the largest power of two dividing D,
    of V by 64, then set_rows)."""
    mod, doc, arrays = ggml
    checked = 0
    for name, c in doc["cases"].items():
        k, v, q = mod.inputs(name)
        assert mod.input_sha(k, v, q) == c["inputs_sha256"], f"{name}: the seeded inputs draw differently here"
        if rotated and not c["rotated"]:
            continue
        hkv, n, d = k.shape
        for which, x in (("k", k), ("v", v)):
            map_id = APPENDS[f"rot_{which}"] if rotated else APPEND
            lib, spec = load_map_library(map_id)
            cache = _poisoned(hkv, n, d)
            _append(bind(lib, spec, "ref"), x.transpose(1, 0, 2).reshape(n, hkv * d), hkv, d, n, 0, cache)
            want = arrays[f"{'rot:' if rotated else ''}{name}:{which}_q8_0"]
            got = cache.reshape(-1)
            bad = np.flatnonzero(want != got)
            assert bad.size == 0, (f"{map_id} [ref] case {name} {which}: {bad.size} bytes differ from ggml, "
                                   f"first at byte {bad[0]} (block {bad[0] // BLOCK}): ggml {want[bad[0]]} ours {got[bad[0]]}")
            checked += 1
    assert checked >= 8


@pytest.mark.parametrize("rotated", [False, True], ids=["plain", "rotated"])
def test_attention_q8kv_ref_equals_ggml_flash_attn(ggml, rotated):
    """Plain: ggml_flash_attn_ext over q8_0 K/V; rotated: llama.cpp's graph around it (Q rotated like K before the
    op, the caches from rotated rows, the output rotated back by 64)."""
    mod, doc, arrays = ggml
    pre = "rot:" if rotated else ""
    checked = 0
    for name, c in doc["cases"].items():
        if rotated and not c["rotated"]:
            continue
        map_id = ATTN[c["mode"] + ("_rot" if rotated else "")]
        lib, spec = load_map_library(map_id)
        ref = bind(lib, spec, "ref")
        k, v, q = mod.inputs(name)
        hq, hkv, d, n = c["Hq"], c["Hkv"], c["D"], c["n_kv"]
        kc = np.ascontiguousarray(arrays[f"{pre}{name}:k_q8_0"])
        vc = np.ascontiguousarray(arrays[f"{pre}{name}:v_q8_0"])
        for i, p in enumerate(c["positions"]):
            got = _attend(ref, np.ascontiguousarray(q[i].reshape(1, hq * d)), kc, vc, 1, hq, hkv, d, n, p, c["scale"],
                          c["window"], 1)
            assert_close_or_equal(arrays[f"{pre}{name}:y"][i].reshape(1, hq * d), got, map_id=map_id, variant="ref",
                                  context=f"case {name} position {p} vs ggml")
            checked += 1
    assert checked >= 10


# ---- every variant == ref ----

APPEND_VARIANTS = [(m, v) for m in APPENDS.values() for v in map_variants(m, ref=False)]
ATTN_VARIANTS = [(m, v) for m in ATTN.values() for v in map_variants(m, ref=False)]


@pytest.mark.parametrize(("map_id", "variant"), APPEND_VARIANTS, ids=[f"{m}-{v}" for m, v in APPEND_VARIANTS])
@pytest.mark.parametrize("case", sorted(CASES))
def test_kv_append_q8_0_variants_match_ref(map_id, variant, case):
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    ref, fn = bind(lib, spec, "ref"), bind(lib, spec, variant)
    m, _hq, hkv, d, pos, _w, _s = CASES[case]
    if map_id != APPEND and d % 64:
        pytest.skip(f"{map_id}: D = {d} is not a multiple of 64")
    _q, k, _v = _case_inputs(case)
    c = pos + m + 3
    want = _poisoned(hkv, c, d)
    _append(ref, k[pos:], hkv, d, c, pos, want)
    for nth in NTH:
        got, check = guarded(want.shape, np.uint8)
        got[...] = _poisoned(hkv, c, d)
        _append(fn, k[pos:], hkv, d, c, pos, got, nth)
        check()
        assert_close_or_equal(want, got, map_id=map_id, variant=variant, context=f"{case} nth={nth}")


@pytest.mark.parametrize(("map_id", "variant"), ATTN_VARIANTS, ids=[f"{m}-{v}" for m, v in ATTN_VARIANTS])
@pytest.mark.parametrize("case", sorted(CASES))
def test_attention_q8kv_variants_match_ref(map_id, variant, case):
    skip_unless_runnable(map_id, variant)
    lib, spec = load_map_library(map_id)
    alib, aspec = load_map_library(APPEND)
    m, hq, hkv, d, pos, window, scale = CASES[case]
    if "rot" in map_id and d % 64:
        pytest.skip(f"{map_id}: D = {d} is not a multiple of 64")
    q, k, v = _case_inputs(case)
    c = pos + m + 5  # cells past pos + M - 1 hold NaN-scaled blocks
    kc, vc = _caches(bind(alib, aspec, "ref"), k, v, hkv, d, c)
    want = _attend(bind(lib, spec, "ref"), q, kc, vc, m, hq, hkv, d, c, pos, scale, window, 1)
    assert np.isfinite(want).all()
    fn = bind(lib, spec, variant)
    for nth in NTH:
        got = _attend(fn, q, kc, vc, m, hq, hkv, d, c, pos, scale, window, nth, threaded=nth == 2)
        assert_close_or_equal(want, got, map_id=map_id, variant=variant, context=f"{case} nth={nth}")


@pytest.mark.parametrize("map_id", sorted(ATTN.values()))
def test_attention_q8kv_ring_layout_equals_full_length(map_id):
    """A ring of window + M - 1 cells, filled chunk by chunk so it wraps, gives the full-length cache's bits."""
    lib, spec = load_map_library(map_id)
    alib, aspec = load_map_library(APPEND)
    append = bind(alib, aspec, "ref")
    for variant in map_variants(map_id):
        skip_unless_runnable(map_id, variant)
        fn = bind(lib, spec, variant)
        for case in ("prefill_window", "decode_window", "window1", "d32"):
            m, hq, hkv, d, pos, window, scale = CASES[case]
            if "rot" in map_id and d % 64:
                continue
            q, k, v = _case_inputs(case)
            full_c = pos + m
            kf, vf = _caches(append, k, v, hkv, d, full_c)
            ring_c = window + m - 1
            kr, vr = _poisoned(hkv, ring_c, d), _poisoned(hkv, ring_c, d)
            for start in range(0, pos, m):  # earlier positions, at most M rows per call as the model writes them
                rows = min(m, pos - start)
                _append(append, k[start:start + rows], hkv, d, ring_c, start, kr)
                _append(append, v[start:start + rows], hkv, d, ring_c, start, vr)
            _append(append, k[pos:], hkv, d, ring_c, pos, kr)
            _append(append, v[pos:], hkv, d, ring_c, pos, vr)
            want = _attend(fn, q, kf, vf, m, hq, hkv, d, full_c, pos, scale, window, 1)
            got = _attend(fn, q, kr, vr, m, hq, hkv, d, ring_c, pos, scale, window, 2)
            assert_close_or_equal(want, got, map_id=map_id, variant=variant, context=f"{case} ring of {ring_c} cells")
