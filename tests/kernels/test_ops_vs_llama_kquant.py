"""K-quant kernels the llama-cpu policy selects, fed llama.cpp's own inputs, return llama.cpp's own outputs bit for bit.

Fixture: tests/fixtures/kquant (make_kquant_fixtures.py: the Gemma 3 270M file requantized by llama.cpp's
quantizer to Q2_K (pure and preset), Q3_K_M, Q5_K_M and Q6_K, run in llama.cpp with flash attention, 1 thread,
one token per decode; per K-quant type and kind (attn_output, ffn_down) one tensor's 64 weight rows, its f32
input at 6 positions and llama.cpp's outputs of those rows; for q2_K / q4_K also llama.cpp's vec_dot on them,
the order it uses for tensors of N % 8 != 0 rows; plus llama.cpp's dequantize_row_<t> of 8 rows).
Each case quantizes the input with the policy's activation quantizer and runs every variant this host can run
of the policy's provider; 0 differing elements is the only pass.

Two llama.cpp builds, two fixture folders: kquant (its AVX-512 build, policy llama-cpu) and kquant_avx2 (its AVX2
build, GGML_AVX512=OFF, policy llama-cpu-avx2; make fixtures-avx2). The AVX2 build does not repack q2_K tensors
(its outputs equal its own vec_dot on every row: checked below), so llama-cpu-avx2 takes q2_K through
linear.q2_k.q8_k.ggml_vecdot.v1. A type a build's policy had no rule for would be refused by it, and the test then
shows why: llama-cpu's kernel must miss some of that build's outputs, so a refusal that is no longer needed fails.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
from fixture_builds import claims, load_builds
from kernel_harness import bind, gguf_layout, load_map_library, ptr, runnable_variants

from kernelmap.maps.provider import FAILED, UNEVALUABLE
from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy
from kernelmap.weights.repack import REPACKED

_ROOT = Path(__file__).resolve().parents[1] / "fixtures"
# build: (fixture folder, the policy that claims that build's bits)
BUILDS = {"avx512": (_ROOT / "kquant", "llama-cpu"), "avx2": (_ROOT / "kquant_avx2", "llama-cpu-avx2")}
SETTINGS_BY_BUILD = {b: json.loads((folder / "settings.json").read_text(encoding="utf-8"))
                     for b, (folder, _) in BUILDS.items()}
SETTINGS = SETTINGS_BY_BUILD["avx512"]
TENSORS = sorted(SETTINGS["tensors"])
TYPES = sorted({t["type"] for t in SETTINGS["tensors"].values()})
BUILD_PARAM = pytest.mark.parametrize("build", sorted(BUILDS))


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


def _takes(map_id: str, m: int, n: int, k: int) -> bool:
    """Whether the resolver could give the provider this shape (e.g. N % 8 == 0 for q4_k_c16)."""
    dims = {"M": m, "N": n, "K": k}
    return not any(c.check(dims)[0] in (FAILED, UNEVALUABLE) for c in _registry().providers[map_id].constraints)


def _variants(map_id: str):
    """(variant, function taking the GGUF-layout weight) of every variant this host runs."""
    lib, spec = load_map_library(map_id)
    names = runnable_variants(map_id)
    assert "ref" in names
    return [(n, gguf_layout(spec, bind(lib, spec, n))) for n in names]


def _quantize_q8_k(x: np.ndarray, build: str) -> np.ndarray:
    map_id, _ = _provider("quantize_act", build, activation="q8_k")
    lib, spec = load_map_library(map_id)
    k = x.size
    y = np.zeros(k // 256 * 292, np.uint8)
    bind(lib, spec, "ref")(ptr(y), ptr(np.ascontiguousarray(x, np.float32)), 1, k, 0, 1)
    return y


@BUILD_PARAM
def test_kquant_fixture_covers_every_kquant_type(build: str) -> None:
    settings = SETTINGS_BY_BUILD[build]
    assert sorted({t["type"] for t in settings["tensors"].values()}) == ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
    assert sorted(settings["tensors"]) == TENSORS
    assert settings["n_threads"] == 1 and settings["flash_attn"] and settings["n_batch"] == 1
    assert ("AVX512 = 1" in settings["system_info"]) == (build == "avx512"), settings["system_info"]


@BUILD_PARAM
@pytest.mark.parametrize("key", TENSORS)
def test_kquant_linear_llama_inputs_give_llama_outputs(fx_builds, build: str, key: str) -> None:
    fx = fx_builds[build]
    info = SETTINGS["tensors"][key]
    claimed = _claims(build, "linear", weight=info["type"])
    map_ids, rule = _providers("linear", build, weight=info["type"])
    assert rule.activation == "q8_k"
    w = np.ascontiguousarray(fx[f"{key}:w"])
    xs, want = fx[f"{key}:x"], fx[f"{key}:y"]
    n, k = w.shape[0], info["K"]
    assert xs.shape == (len(SETTINGS["prompt"]), k) and want.shape == (xs.shape[0], n)
    bad: dict[str, list[int]] = {}
    # a refused type: its GGUF-layout provider's counts; a claimed one: every provider that can take the shape
    runs = [(v if prov == map_ids[0] else f"{prov}.{v}", fn) for prov in (map_ids if claimed else map_ids[:1])
            if _takes(prov, 1, n, k) for v, fn in _variants(prov)]
    map_id = " / ".join(map_ids)
    for vname, fn in runs:
        for pos in range(xs.shape[0]):
            xq = _quantize_q8_k(xs[pos], build)
            y = np.full(n, np.nan, np.float32)
            fn(ptr(y), ptr(w), ptr(xq), 1, n, k, 0, 1)
            diff = np.flatnonzero(y.view(np.uint32) != want[pos].view(np.uint32))
            if diff.size:
                bad.setdefault(vname, []).append(int(diff.size))
                print(f"{map_id} [{vname}] {key} position {pos}: {diff.size} of {n} differ, first rows "
                      f"{diff[:4].tolist()}: got {y[diff[:4]].tolist()} want {want[pos][diff[:4]].tolist()}")
    if not claimed:
        assert bad, (f"{BUILDS[build][1]} refuses {info['type']} linears, but llama-cpu's {map_id} gives the {build} "
                     f"build's outputs on {key}: the rule can be added")
        return
    assert not bad, f"{map_id} on {key}: differing elements per variant {bad}"


@BUILD_PARAM
@pytest.mark.parametrize("key", [k for k in TENSORS if SETTINGS["tensors"][k]["type"] in ("q2_k", "q4_k")])
def test_kquant_linear_unrepacked_rows_give_llama_vec_dot(fx_builds, build: str, key: str) -> None:
    """q2_K / q4_K weights of N % 8 != 0 rows (63 here), which llama.cpp does not repack: its vec_dot order."""
    fx = fx_builds[build]
    info = SETTINGS["tensors"][key]
    if not _claims(build, "linear", weight=info["type"]):
        pytest.skip(f"{BUILDS[build][1]} refuses {info['type']} (its repacked order: "
                    "test_kquant_linear_llama_inputs_give_llama_outputs)")
    map_ids, _ = _providers("linear", build, weight=info["type"])
    n, k = 63, info["K"]
    w = np.ascontiguousarray(fx[f"{key}:w"][:n])
    xs, want = fx[f"{key}:x"], fx[f"{key}:y_vec_dot"][:, :n]
    bad: dict[str, int] = {}
    map_id = " / ".join(m for m in map_ids if _takes(m, 1, n, k))  # a 16-row layout's N % 8 == 0: not its shape
    for vname, fn in [(f"{m}.{v}", f) for m in map_ids if _takes(m, 1, n, k) for v, f in _variants(m)]:
        for pos in range(xs.shape[0]):
            xq = _quantize_q8_k(xs[pos], build)  # kept alive across the call
            y = np.full(n, np.nan, np.float32)
            fn(ptr(y), ptr(w), ptr(xq), 1, n, k, 0, 1)
            bad[vname] = bad.get(vname, 0) + int((y.view(np.uint32) != want[pos].view(np.uint32)).sum())
    assert not any(bad.values()), f"{map_id} on {key} (N = {n}): differing elements per variant {bad}"


@pytest.mark.parametrize("key", [k for k in TENSORS if SETTINGS["tensors"][k]["type"] == "q2_k"])
def test_kquant_avx2_build_does_not_repack_q2_k(fx_builds, key: str) -> None:
    """Why the two builds need two q2_K contracts: the AVX2 build's MUL_MAT outputs on a tensor of N % 8 == 0 rows
    are its own vec_dot's bit for bit, while the AVX-512 build's (repacked 8x8 gemv) differ from its vec_dot."""
    for build, same in (("avx2", True), ("avx512", False)):
        y, v = fx_builds[build][f"{key}:y"], fx_builds[build][f"{key}:y_vec_dot"]
        assert y.shape == v.shape and SETTINGS_BY_BUILD[build]["tensors"][key]["rows"] % 8 == 0
        assert np.array_equal(y.view(np.uint32), v.view(np.uint32)) == same, (build, key)
    assert load_policy("llama-cpu-avx2").rule_for("linear", weight="q2_k").contract == "linear.q2_k.q8_k.ggml_vecdot.v1"


@BUILD_PARAM
@pytest.mark.parametrize("typ", TYPES)
def test_kquant_embedding_rows_give_llama_dequantize(fx_builds, build: str, typ: str) -> None:
    fx = fx_builds[build]
    assert _claims(build, "embedding", weight=typ), f"{BUILDS[build][1]}: no embedding rule for {typ}"
    map_id, _ = _provider("embedding", build, weight=typ)
    table = np.ascontiguousarray(fx[f"{typ}:deq_w"])
    want = fx[f"{typ}:deq_y"]
    rows, d = want.shape
    ids = np.arange(rows, dtype=np.int32)[::-1].copy()
    for vname, fn in _variants(map_id):
        y = np.full((rows, d), np.nan, np.float32)
        fn(ptr(y), ptr(table), ptr(ids), rows, rows, d, 1.0, 0, 1)
        diff = np.flatnonzero(y.view(np.uint32) != want[ids].view(np.uint32))
        assert diff.size == 0, (f"{map_id} [{vname}]: {diff.size} of {y.size} values differ from llama.cpp's "
                                f"dequantize_row, first {diff[:4].tolist()}")
