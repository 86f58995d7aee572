"""K-quant kernels the llama-cpu policy selects, fed llama.cpp's own inputs, return llama.cpp's own outputs bit for bit.

Fixture: tests/fixtures/kquant (make_kquant_fixtures.py: the Gemma 3 270M file requantized by llama.cpp's
quantizer to Q2_K (pure and preset), Q3_K_M, Q5_K_M and Q6_K, run in llama.cpp with flash attention, 1 thread,
one token per decode; per K-quant type and kind (attn_output, ffn_down) one tensor's 64 weight rows, its f32
input at 6 positions and llama.cpp's outputs of those rows; for q2_K / q4_K also llama.cpp's vec_dot on them,
the order it uses for tensors of N % 8 != 0 rows; plus llama.cpp's dequantize_row_<t> of 8 rows).
Each case quantizes the input with the policy's activation quantizer and runs every variant this host can run
of the policy's provider; 0 differing elements is the only pass.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
from kernel_harness import bind, load_map_library, ptr, runnable_variants

from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kquant"
POLICY = "llama-cpu"
SETTINGS = json.loads((FIXTURES / "settings.json").read_text(encoding="utf-8"))
TENSORS = sorted(SETTINGS["tensors"])
TYPES = sorted({t["type"] for t in SETTINGS["tensors"].values()})


@pytest.fixture(scope="module")
def fx() -> dict[str, np.ndarray]:
    z = np.load(FIXTURES / "ops.npz")
    return {k: z[k] for k in z.files}


@functools.cache
def _registry():
    return load_registry()


def _provider(op: str, **keys: str) -> tuple[str, object]:
    rule = load_policy(POLICY).rule_for(op, **keys)
    ids = [p.id for p in _registry().by_op(op) if p.contract == rule.contract and p.status == "production"]
    assert len(ids) == 1, f"{rule.contract}: production providers {ids}"
    return ids[0], rule


def _variants(map_id: str):
    lib, spec = load_map_library(map_id)
    names = runnable_variants(map_id)
    assert "ref" in names
    return [(n, bind(lib, spec, n)) for n in names]


def _quantize_q8_k(x: np.ndarray) -> np.ndarray:
    map_id, _ = _provider("quantize_act", activation="q8_k")
    lib, spec = load_map_library(map_id)
    k = x.size
    y = np.zeros(k // 256 * 292, np.uint8)
    bind(lib, spec, "ref")(ptr(y), ptr(np.ascontiguousarray(x, np.float32)), 1, k, 0, 1)
    return y


def test_kquant_fixture_covers_every_kquant_type() -> None:
    assert TYPES == ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
    assert SETTINGS["n_threads"] == 1 and SETTINGS["flash_attn"] and SETTINGS["n_batch"] == 1


@pytest.mark.parametrize("key", TENSORS)
def test_kquant_linear_llama_inputs_give_llama_outputs(fx, key: str) -> None:
    info = SETTINGS["tensors"][key]
    map_id, rule = _provider("linear", weight=info["type"])
    assert rule.activation == "q8_k"
    w = np.ascontiguousarray(fx[f"{key}:w"])
    xs, want = fx[f"{key}:x"], fx[f"{key}:y"]
    n, k = w.shape[0], info["K"]
    assert xs.shape == (len(SETTINGS["prompt"]), k) and want.shape == (xs.shape[0], n)
    bad: dict[str, list[int]] = {}
    for vname, fn in _variants(map_id):
        for pos in range(xs.shape[0]):
            xq = _quantize_q8_k(xs[pos])
            y = np.full(n, np.nan, np.float32)
            fn(ptr(y), ptr(w), ptr(xq), 1, n, k, 0, 1)
            diff = np.flatnonzero(y.view(np.uint32) != want[pos].view(np.uint32))
            if diff.size:
                bad.setdefault(vname, []).append(int(diff.size))
                print(f"{map_id} [{vname}] {key} position {pos}: {diff.size} of {n} differ, first rows "
                      f"{diff[:4].tolist()}: got {y[diff[:4]].tolist()} want {want[pos][diff[:4]].tolist()}")
    assert not bad, f"{map_id} on {key}: differing elements per variant {bad}"


@pytest.mark.parametrize("key", [k for k in TENSORS if SETTINGS["tensors"][k]["type"] in ("q2_k", "q4_k")])
def test_kquant_linear_unrepacked_rows_give_llama_vec_dot(fx, key: str) -> None:
    """q2_K / q4_K weights of N % 8 != 0 rows (63 here), which llama.cpp does not repack: its vec_dot order."""
    info = SETTINGS["tensors"][key]
    map_id, _ = _provider("linear", weight=info["type"])
    n, k = 63, info["K"]
    w = np.ascontiguousarray(fx[f"{key}:w"][:n])
    xs, want = fx[f"{key}:x"], fx[f"{key}:y_vec_dot"][:, :n]
    bad: dict[str, int] = {}
    for vname, fn in _variants(map_id):
        for pos in range(xs.shape[0]):
            xq = _quantize_q8_k(xs[pos])  # kept alive across the call
            y = np.full(n, np.nan, np.float32)
            fn(ptr(y), ptr(w), ptr(xq), 1, n, k, 0, 1)
            bad[vname] = bad.get(vname, 0) + int((y.view(np.uint32) != want[pos].view(np.uint32)).sum())
    assert not any(bad.values()), f"{map_id} on {key} (N = {n}): differing elements per variant {bad}"


@pytest.mark.parametrize("typ", TYPES)
def test_kquant_embedding_rows_give_llama_dequantize(fx, typ: str) -> None:
    map_id, _ = _provider("embedding", weight=typ)
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
