"""The family models on llama.cpp's AVX2 build (GGML_AVX512=OFF) under llama-cpu-avx2: every logit bit for bit.

Fixtures: tests/fixtures/families_avx2 (tests/fixtures/families/record_build.py: the committed family models of
tests/fixtures/families run by the AVX2 peer, prompt + 32 greedy steps, every logit after every token). These
contracts make that build's arithmetic on these models, besides Gemma's: swiglu.f32.ggml_exp8.v1 (its SiLU's 8-lane
exp), attention_kq.f16kv.ggml_fa_dot32.v1 (the kq-scaled attention with its 8-lane score dot), the dot32 f16
linears, and for the MoE moe_router.f32.ggml_dot32.v1 (its router's 8-lane logit dot and softmax exp). Every
cell (Llama with rope frequency factors, Qwen2 with biases, Qwen3 with q/k norm, Phi-3, the 192-wide Llama at
Q4_K_M's q5_0/q8_0 fallback, Qwen3-MoE) must be bit-exact at every one of its 40 positions, but Qwen3-MoE F16,
which must be refused naming its f16 expert tensor (no f16 moe_linear rule in either policy). The matrix compiles
with the ref variants (every SIMD variant equals its ref under the same contract, tested per kernel); make test
runs four cells that cover the new contracts and every other family op, KERNELMAP_SLOW=1 all 24.

The end of the module checks llama-cpu-avx2-t2 against tests/fixtures/families_avx2_t2: the same build on 2 threads
over 308 positions of the Llama and Qwen3 models, where llama.cpp splits the kq-scaled attention's keys from position
256 on (attention_kq.f16kv.ggml_fa_dot32_split2.v1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from kernelmap.compiler import CompileOptions
from kernelmap.families.matrix import load_fixtures, run_cell

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ROWS = ("llama", "qwen2", "qwen3", "phi3", "llama-d192", "qwen3moe")
PRESETS = ("Q8_0", "Q4_K_M", "Q4_0", "F16")
REFUSED = [("qwen3moe", "F16")]
EXACT = [(a, p) for a in ROWS for p in PRESETS if (a, p) not in REFUSED]
# rope_ff + swiglu + attention_kq (llama), q/k norm + f16 linears (qwen3 F16), bias (qwen2), the MoE router + experts
FAST = [("llama", "Q4_K_M"), ("qwen3", "F16"), ("qwen2", "Q4_0"), ("qwen3moe", "Q4_K_M")]
OPTIONS = CompileOptions(max_rows=16, isa=frozenset(), policy="llama-cpu-avx2")


@pytest.fixture(scope="module")
def fixtures():
    return load_fixtures(FIX / "families_avx2")


def test_families_avx2_fixtures_are_the_committed_models_on_the_avx2_build(fixtures):
    base = load_fixtures(FIX / "families")
    info = fixtures["settings"]["system_info"]
    assert "AVX2 = 1" in info and "AVX512 = 1" not in info, info
    assert fixtures["settings"]["version"] == base["settings"]["version"] and fixtures["settings"]["n_threads"] == 1
    assert fixtures["settings"]["flash_attn"] and fixtures["settings"]["type_k"] == "f16"
    assert fixtures["steps"] == base["steps"] and sorted(fixtures["models"]) == sorted(base["models"])
    for arch, entry in base["models"].items():
        for preset, p in entry["presets"].items():
            assert fixtures["models"][arch]["presets"][preset]["sha256"] == p["sha256"], (arch, preset)
            assert (FIX / "families_avx2" / "peer" / f"{arch}-{preset}.npz").is_file()
    every = EXACT + REFUSED
    assert len(every) == len(set(every)) == 24 and not set(FAST) - set(EXACT)


def _check(cell, arch, preset):
    detail = json.dumps(cell.as_dict(), default=str)[:600]
    if (arch, preset) in REFUSED:  # fail closed, naming the tensor and its type
        assert cell.status == "refused" and "ffn_up_exps.weight/type" in cell.error and "f16" in cell.error, detail
        return
    assert cell.status == "bit-exact" and cell.positions == 40, detail
    assert cell.greedy_identical and cell.prefill_exact and not cell.reasons, detail


@pytest.mark.parametrize("arch,preset", FAST, ids=[f"{a}-{p}" for a, p in FAST])
def test_avx2_build_family_cell_is_bit_exact(fixtures, tmp_path, arch, preset):
    cell = run_cell(fixtures, arch, preset, work=tmp_path, options=OPTIONS)
    _check(cell, arch, preset)
    want = {"llama": {"swiglu.f32.ggml_exp8.v1", "attention_kq.f16kv.ggml_fa_dot32.v1", "rope_ff.normal.f32.v1"},
            "qwen3": {"linear.f16.f16.ggml_dot32.v1", "qk_norm_rope.neox.f32.v1"},
            "qwen2": {"bias_add.f32.v1"},
            "qwen3moe": {"moe_router.f32.ggml_dot32.v1", "moe_linear.q4_k.q8_k.ggml.v1", "moe_combine.f32.v1"}}[arch]
    assert want <= set(cell.contracts), cell.contracts


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KERNELMAP_SLOW"), reason="slow (24 cells): set KERNELMAP_SLOW=1")
@pytest.mark.parametrize("arch,preset", EXACT + REFUSED, ids=[f"{a}-{p}" for a, p in EXACT + REFUSED])
def test_family_matrix_avx2_build_cell_is_bit_exact(fixtures, tmp_path, arch, preset):
    _check(run_cell(fixtures, arch, preset, work=tmp_path, options=OPTIONS), arch, preset)


# --- two threads, past 256 positions: llama.cpp splits a row's keys (llama-cpu-avx2-t2) --------------------------

LONG = [("llama", "Q8_0"), ("qwen3", "Q8_0")]


@pytest.fixture(scope="module")
def long_fixtures():
    return load_fixtures(FIX / "families_avx2_t2")


def _teacher_forced(fixtures, arch, preset, policy, work):
    """Our logits after each of llama.cpp's tokens (one per decode), and llama.cpp's."""
    from kernelmap.compiler import compile_model
    from kernelmap.families.matrix import model_path
    from kernelmap.runtime.model import Model

    peer = np.load(FIX / "families_avx2_t2" / "peer" / f"{arch}-{preset}.npz")
    tokens = [int(t) for t in peer["tokens"]]
    compiled = compile_model(model_path(fixtures, arch, preset, work),
                             CompileOptions(max_rows=16, isa=frozenset(), policy=policy))
    model = Model(compiled, n_ctx=512, threads=1)
    try:
        got = np.stack([(model.prefill([t]) if i == 0 else model.decode(t)).copy() for i, t in enumerate(tokens)])
    finally:
        model.close()
    return got, np.asarray(peer["logits"], np.float32)


def test_families_avx2_t2_fixtures_are_two_threads_past_256_positions(long_fixtures):
    s = long_fixtures["settings"]
    assert s["n_threads"] == 2 and s["n_ctx"] >= 512 and "AVX512 = 1" not in s["system_info"], s
    for arch, preset in LONG:
        assert len(long_fixtures["models"][arch]["prompt"]) + long_fixtures["steps"] > 300
        assert long_fixtures["models"][arch]["presets"][preset]["sha256"] == \
            load_fixtures(FIX / "families")["models"][arch]["presets"][preset]["sha256"]


@pytest.mark.parametrize("arch,preset", LONG, ids=[f"{a}-{p}" for a, p in LONG])
def test_avx2_build_two_threads_llama_long_context_is_bit_exact(long_fixtures, tmp_path, arch, preset):
    """llama-cpu-avx2-t2 gives every logit of llama.cpp's AVX2 build on 2 threads over 308+ positions; the
    one-thread policy matches it below position 256 and not after (the split is what the contract adds)."""
    got, want = _teacher_forced(long_fixtures, arch, preset, "llama-cpu-avx2-t2", tmp_path)
    bad = np.flatnonzero((got.view(np.uint32) != want.view(np.uint32)).any(1))
    assert bad.size == 0, f"{arch} {preset}: positions differing from llama.cpp -t 2: {bad[:10].tolist()}"
    one, _ = _teacher_forced(long_fixtures, arch, preset, "llama-cpu-avx2", tmp_path)
    diff = np.flatnonzero((one.view(np.uint32) != want.view(np.uint32)).any(1))
    assert diff.size and diff.min() >= 256, f"one-thread order vs -t 2: differing positions {diff[:10].tolist()}"
