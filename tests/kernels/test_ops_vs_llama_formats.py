"""Legacy 32-element and float kernels the llama-cpu policy selects return llama.cpp's own outputs bit for bit.

Fixture: tests/fixtures/formats (make_format_fixtures.py). Real ops: the Gemma 3 270M file requantized by
llama.cpp's quantizer to Q4_0, Q4_1, Q5_1, F16, BF16 and F32, run in llama.cpp (flash attention, 1 thread, one
token per decode); per preset the first layer's attn_q / attn_output / ffn_down of the preset's type (and the
tied LM head of the float presets): weight rows, the MUL_MAT's f32 input at 6 positions and llama.cpp's outputs of
those rows, plus the scaled embedding of each position. Direct calls: llama.cpp's own quantize_row_q8_1,
ggml_vec_dot_{q4_0,q4_1,q5_1,f16,bf16,f32}, ggml_gemv_q4_0_8x8_q8_0, ggml_cpu_fp32_to_{fp16,bf16} and
dequantize_row_<t> on seeded random data with K tails, odd block counts, subnormals and rounding ties.
Each case runs the policy's activation quantizer and every variant this host can run of the policy's provider;
0 differing bits is the only pass.

Two llama.cpp builds, two fixture folders: formats (its AVX-512 build, policy llama-cpu) and formats_avx2 (its AVX2
build, GGML_AVX512=OFF, policy llama-cpu-avx2; make fixtures-avx2). A weight type the build's policy has no rule
for is refused by it, and the real-op test then shows why: llama-cpu's kernel must miss some of that build's
outputs (the AVX2 build's ggml_vec_dot_f16 / _bf16 / _f32 add 8-float lanes), so a refusal that is no longer needed
fails too.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
from fixture_builds import claims, load_builds
from kernel_harness import bind, gguf_layout, host_can_run, load_map_library, ptr

from kernelmap.maps.provider import FAILED, UNEVALUABLE
from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy
from kernelmap.weights.repack import REPACKED

_ROOT = Path(__file__).resolve().parents[1] / "fixtures"
# build: (fixture folder, the policy that claims that build's bits)
BUILDS = {"avx512": (_ROOT / "formats", "llama-cpu"), "avx2": (_ROOT / "formats_avx2", "llama-cpu-avx2")}
SETTINGS_BY_BUILD = {b: json.loads((folder / "settings.json").read_text(encoding="utf-8"))
                     for b, (folder, _) in BUILDS.items()}
SETTINGS = SETTINGS_BY_BUILD["avx512"]
TENSORS = sorted(SETTINGS["tensors"])
BUILD_PARAM = pytest.mark.parametrize("build", sorted(BUILDS))
ROW_BYTES = {"q4_0": 18, "q4_1": 20, "q5_1": 24, "q8_0": 34, "q8_1": 36}  # per 32 values
DIRECT_DOTS = [f"{t}/{nb}" for t in ("q4_0", "q4_1", "q5_1") for nb in (1, 7, 20, 67)] + \
    [f"gemv_q4_0_8x8/{nb}" for nb in (1, 20, 64)] + [f"{t}/{k}" for t in ("f16", "bf16", "f32") for k in
                                                        (17, 64, 200, 640, 1000)]


@pytest.fixture(scope="module")
def fx_builds() -> dict[str, dict[str, np.ndarray]]:
    return load_builds(BUILDS)


def _claims(build: str, op: str, **keys: str) -> bool:
    """Whether the build's policy has a rule for the op (a refused one is checked to be needed instead)."""
    return claims(BUILDS[build][1], op, **keys)


@functools.cache
def _registry():
    return load_registry()


def _providers(op: str, build: str = "avx512", **keys: str) -> tuple[list[str], object]:
    """The production providers of the build's policy's contract (for an op that policy refuses, llama-cpu's: what
    the refusal is checked on): the GGUF-layout provider first, then any reading a repacked weight layout."""
    policy = BUILDS[build][1] if _claims(build, op, **keys) else "llama-cpu"
    rule = load_policy(policy).rule_for(op, **keys)
    found = [p for p in _registry().by_op(op) if p.contract == rule.contract and p.status == "production"]
    ids = [p.id for p in sorted(found, key=lambda p: (any(w.layout in REPACKED for w in p.weights), p.id))]
    assert ids and not any(w.layout in REPACKED for w in _registry().providers[ids[0]].weights), (
        f"{rule.contract}: production providers {ids}")
    return ids, rule


def _provider(op: str, build: str = "avx512", **keys: str) -> tuple[str, object]:
    """The one production provider of the contract (ops without repacked-layout providers)."""
    ids, rule = _providers(op, build, **keys)
    assert len(ids) == 1, f"{rule.contract}: production providers {ids}"
    return ids[0], rule


def _variants(map_id: str):
    """(variant, function taking the GGUF-layout weight) of every variant this host runs."""
    lib, spec = load_map_library(map_id)
    names = [v["name"] for v in spec["variants"] if host_can_run(v["requires"])[0]]
    assert "ref" in names
    return [(n, gguf_layout(spec, bind(lib, spec, n))) for n in names]


def _nbytes(act: str, m: int, k: int) -> int:
    return m * k * {"f16": 2, "bf16": 2, "f32": 4}[act] if act in ("f16", "bf16", "f32") else m * k // 32 * ROW_BYTES[act]


def _activation(act: str, x: np.ndarray, build: str = "avx512") -> np.ndarray:
    """x f32 [M, K] through the policy's quantize_act provider for `act` (f32: as it is)."""
    x = np.ascontiguousarray(np.atleast_2d(x), np.float32)
    if act == "f32":
        return x
    map_id, _ = _provider("quantize_act", build, activation=act)
    lib, spec = load_map_library(map_id)
    m, k = x.shape
    y = np.zeros(_nbytes(act, m, k), np.uint8)
    bind(lib, spec, "ref")(ptr(y), ptr(x), m, k, 0, 1)
    return y


def _diff(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.asarray(got, np.float32).view(np.uint32).ravel() !=
                          np.asarray(want, np.float32).view(np.uint32).ravel())


def _linear_cases(typ: str, w: np.ndarray, xq: np.ndarray, want: np.ndarray, m: int, n: int, k: int, label: str,
                  build: str = "avx512") -> dict[str, int]:
    """Every runnable variant of the provider on one case; asserts 0 differing elements when the build's policy
    claims the type, else returns the differing counts per variant (llama-cpu's provider)."""
    claimed = _claims(build, "linear", weight=typ)
    map_ids, _ = _providers("linear", build, weight=typ)
    bad = {}
    dims = {"M": m, "N": n, "K": k}
    for map_id in map_ids if claimed else map_ids[:1]:  # a refused type: its GGUF-layout provider's counts
        if any(c.check(dims)[0] in (FAILED, UNEVALUABLE) for c in _registry().providers[map_id].constraints):
            continue  # a shape the resolver would never give this provider (e.g. K % 64 for q32_r8)
        for vname, fn in _variants(map_id):
            y = np.full((m, n), np.nan, np.float32)
            fn(ptr(y), ptr(np.ascontiguousarray(w)), ptr(xq), m, n, k, 0, 1)
            d = _diff(y, want)
            if d.size:
                bad[vname if map_id == map_ids[0] else f"{map_id}.{vname}"] = int(d.size)
                print(f"{map_id} [{vname}] {label}: {d.size} of {want.size} differ, first {d[:4].tolist()}: "
                      f"got {y.ravel()[d[:4]].tolist()} want {np.asarray(want).ravel()[d[:4]].tolist()}")
    if claimed:
        assert not bad, f"{map_ids} on {label}: differing elements per variant {bad}"
    return bad


@BUILD_PARAM
def test_format_fixture_covers_every_type_and_preset(build: str) -> None:
    settings = SETTINGS_BY_BUILD[build]
    assert sorted({t["type"] for t in settings["tensors"].values()}) == ["bf16", "f16", "f32", "q4_0", "q4_1", "q5_1"]
    assert sorted(settings["tensors"]) == TENSORS
    assert settings["n_threads"] == 1 and settings["flash_attn"] and settings["n_batch"] == 1
    assert settings["direct"]["ggml_gemv_q4_0_8x8_q8_0"]["gemm_4_rows_equal_gemv"]
    assert ("AVX512 = 1" in settings["system_info"]) == (build == "avx512"), settings["system_info"]


@BUILD_PARAM
@pytest.mark.parametrize("key", TENSORS)
def test_format_linear_llama_inputs_give_llama_outputs(fx_builds, build: str, key: str) -> None:
    fx = fx_builds[build]
    info = SETTINGS["tensors"][key]
    typ, k = info["type"], info["K"]
    _, rule = _providers("linear", build, weight=typ)
    w, xs, want = fx[f"{key}:w"], fx[f"{key}:x"], fx[f"{key}:y"]
    n = w.shape[0]
    assert xs.shape == (len(SETTINGS["prompt"]), k) and want.shape == (xs.shape[0], n)
    if typ == "q4_0":  # llama.cpp repacked the whole tensor (N % 8 == 0); our rows must take the same order
        assert info["N"] % 8 == 0 and n % 8 == 0
    missed = []
    for pos in range(xs.shape[0]):
        missed.append(_linear_cases(typ, w, _activation(rule.activation, xs[pos], build), want[pos][None], 1, n, k,
                                    f"{key} position {pos}", build))
    # the same rows as one prefill call: the contract is row-independent
    missed.append(_linear_cases(typ, w, _activation(rule.activation, xs, build), want, xs.shape[0], n, k,
                                f"{key} all positions", build))
    if not _claims(build, "linear", weight=typ):
        assert any(missed), (f"{BUILDS[build][1]} refuses {typ} linears, but llama-cpu's kernel gives the {build} "
                             f"build's outputs on {key}: the rule can be added")


@BUILD_PARAM
@pytest.mark.parametrize("case", DIRECT_DOTS)
def test_format_linear_llama_vec_dot_gives_llama_outputs(fx_builds, build: str, case: str) -> None:
    fx = fx_builds[build]
    fam, _, size = case.partition("/")
    typ = "q4_0" if fam.startswith("gemv") else fam
    if not _claims(build, "linear", weight=typ):
        pytest.skip(f"{BUILDS[build][1]} refuses {typ} linears (test_format_linear_llama_inputs_give_llama_outputs)")
    key = f"direct/{'gemv_q4_0_8x8' if fam.startswith('gemv') else 'vec_dot_' + typ}/{size}"
    w, x, want = fx[f"{key}:w"], fx[f"{key}:x"], fx[f"{key}:y"]
    _, rule = _providers("linear", build, weight=typ)
    xq = _activation(rule.activation, x, build)
    held = fx[f"{key}:xq"] if f"{key}:xq" in fx else fx[f"{key}:xt"]
    assert np.array_equal(xq.view(np.uint8).ravel(), np.ascontiguousarray(held).view(np.uint8).ravel()), \
        f"{case}: our {rule.activation} activation differs from llama.cpp's"
    m, n, k = x.shape[0], w.shape[0], x.shape[1]
    if typ == "q4_0":  # N = 5 takes vec_dot_q4_0_q8_0, N = 24 the repacked gemv: the contract's two orders
        assert (n % 8 == 0) == fam.startswith("gemv")
    _linear_cases(typ, w, xq, want, m, n, k, case, build)


@BUILD_PARAM
def test_format_activation_quantizers_give_llama_bytes(fx_builds, build: str) -> None:
    fx = fx_builds[build]
    x = fx["direct/quantize_q8_1:x"]
    assert np.array_equal(_activation("q8_1", x, build), fx["direct/quantize_q8_1:y"].ravel())
    for act in ("f16", "bf16"):
        x = fx[f"direct/convert_{act}:x"]
        got = _activation(act, x[None]).view(np.uint16)
        want = fx[f"direct/convert_{act}:y"].view(np.uint16)
        assert np.array_equal(got, want), f"{act}: {np.flatnonzero(got != want).tolist()}"
    for act, map_id in (("q8_1", "quantize_act_q8_1_rne"), ("f16", "quantize_act_f16"), ("bf16", "quantize_act_bf16")):
        src = "direct/quantize_q8_1:x" if act == "q8_1" else f"direct/convert_{act}:x"
        want = fx["direct/quantize_q8_1:y"].ravel() if act == "q8_1" else fx[f"direct/convert_{act}:y"].view(np.uint8)
        x = np.ascontiguousarray(np.atleast_2d(fx[src]), np.float32)
        for vname, fn in _variants(map_id):
            y = np.zeros(_nbytes(act, *x.shape), np.uint8)
            fn(ptr(y), ptr(x), x.shape[0], x.shape[1], 0, 1)
            assert np.array_equal(y, want), f"{map_id} [{vname}] differs from llama.cpp's bytes"


@BUILD_PARAM
@pytest.mark.parametrize("typ", ["q4_0", "q4_1", "q5_1"])
def test_format_embedding_rows_give_llama_dequantize(fx_builds, build: str, typ: str) -> None:
    fx = fx_builds[build]
    assert _claims(build, "embedding", weight=typ), f"{BUILDS[build][1]}: no embedding rule for {typ}"
    map_id, _ = _provider("embedding", build, weight=typ)
    table = np.ascontiguousarray(fx[f"direct/dequantize_{typ}:w"])
    want = fx[f"direct/dequantize_{typ}:y"]
    rows, d = want.shape
    ids = np.arange(rows, dtype=np.int32)[::-1].copy()
    for vname, fn in _variants(map_id):
        y = np.full((rows, d), np.nan, np.float32)
        fn(ptr(y), ptr(table), ptr(ids), rows, rows, d, 1.0, 0, 1)
        diff = _diff(y, want[ids])
        assert diff.size == 0, f"{map_id} [{vname}]: {diff.size} of {y.size} values differ from dequantize_row"


@BUILD_PARAM
@pytest.mark.parametrize("preset", ["F16", "BF16", "F32"])
def test_format_embedding_gives_llama_scaled_embedding(fx_builds, build: str, preset: str) -> None:
    fx = fx_builds[build]
    typ = SETTINGS_BY_BUILD[build]["models"][preset]["token_embd"]
    assert _claims(build, "embedding", weight=typ), f"{BUILDS[build][1]}: no embedding rule for {typ}"
    map_id, _ = _provider("embedding", build, weight=typ)
    table = np.ascontiguousarray(fx[f"{preset}/embedding:table"])  # the rows of the prompt's tokens, in order
    want = fx[f"{preset}/embedding:y"]
    rows, d = want.shape
    ids = np.arange(rows, dtype=np.int32)
    scale = float(np.sqrt(np.float32(d)))
    for vname, fn in _variants(map_id):
        y = np.full((rows, d), np.nan, np.float32)
        fn(ptr(y), ptr(table), ptr(ids), rows, rows, d, scale, 0, 1)
        diff = _diff(y, want)
        assert diff.size == 0, f"{map_id} [{vname}] {preset}: {diff.size} of {y.size} values differ from inp_scaled"
