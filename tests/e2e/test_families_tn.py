"""The family models on llama.cpp's AVX-512 build on 2 and 4 threads past 256 positions, under llama-cpu-t2 / -t4:
every logit.

Fixtures: tests/fixtures/families_t2 and families_t4, recorded by tests/fixtures/families/record_build.py (--threads
2 or 4 --long-prompt 300 --rows llama,qwen3 --presets Q8_0 --ctx 512 --steps 8) with the peer `make peer` builds
(llama.cpp 0.3.36, AVX-512 without AMX, the build of tests/fixtures/families; 4 threads on a 2-CPU machine too: the
bits depend on the thread count, not the cores): the committed tiny Llama and Qwen3 models over BOS + 300 seeded
random ids and 8 greedy steps, every logit after every token. From position 256 on (a 512-cell KV view) llama.cpp
splits a decoded row's keys between its N threads; for the kq-scaled attention of these graphs that is
attention_kq.f16kv.ggml_fa_split<N>.v1 in llama-cpu-t<N>, until then checked only against the AVX2 build's 2-thread
dot32 split (tests/e2e/test_families_avx2.py). The models compile with the ref variants (every SIMD variant equals its ref under
the same contract, tested per kernel), so this runs on any host.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernelmap.compiler import CompileOptions
from kernelmap.families.matrix import load_fixtures, model_path

FIX = Path(__file__).resolve().parents[1] / "fixtures"
LONG = [("llama", "Q8_0"), ("qwen3", "Q8_0")]
THREADS = (2, 4)
CASES = [(n, a, p) for n in THREADS for a, p in LONG]


@pytest.fixture(scope="module", params=THREADS, ids=[f"t{n}" for n in THREADS])
def long_fixtures(request):
    return request.param, load_fixtures(FIX / f"families_t{request.param}")


def _teacher_forced(fixtures, folder, arch, preset, policy, work):
    """Our logits after each of llama.cpp's tokens (one per decode), and llama.cpp's."""
    from kernelmap.compiler import compile_model
    from kernelmap.runtime.model import Model

    peer = np.load(FIX / folder / "peer" / f"{arch}-{preset}.npz")
    tokens = [int(t) for t in peer["tokens"]]
    compiled = compile_model(model_path(fixtures, arch, preset, work),
                             CompileOptions(max_rows=16, isa=frozenset(), policy=policy))
    model = Model(compiled, n_ctx=512, threads=1)
    try:
        got = np.stack([(model.prefill([t]) if i == 0 else model.decode(t)).copy() for i, t in enumerate(tokens)])
    finally:
        model.close()
    return got, np.asarray(peer["logits"], np.float32), compiled


def test_families_tn_fixtures_are_the_avx512_build_on_n_threads_past_256_positions(long_fixtures):
    n, long_fixtures = long_fixtures
    s = long_fixtures["settings"]
    base = load_fixtures(FIX / "families")
    assert s["n_threads"] == n and s["n_ctx"] >= 512 and s["flash_attn"] and s["type_k"] == s["type_v"] == "f16", s
    assert s["system_info"] == base["settings"]["system_info"] and "AVX512 = 1" in s["system_info"], s
    assert s["version"] == base["settings"]["version"]
    for arch, preset in LONG:
        assert len(long_fixtures["models"][arch]["prompt"]) + long_fixtures["steps"] > 300
        assert long_fixtures["models"][arch]["presets"][preset]["sha256"] == \
            base["models"][arch]["presets"][preset]["sha256"]


@pytest.mark.parametrize("n,arch,preset", CASES, ids=[f"t{n}-{a}-{p}" for n, a, p in CASES])
def test_n_threads_long_context_is_bit_exact_with_the_avx512_build(tmp_path, n, arch, preset):
    """llama-cpu-t<N> gives every logit of llama.cpp's AVX-512 build on N threads over 309 positions; llama-cpu (its
    one-thread order) matches it below position 256 and not after (the split is what the contract adds)."""
    folder = f"families_t{n}"
    fixtures = load_fixtures(FIX / folder)
    got, want, compiled = _teacher_forced(fixtures, folder, arch, preset, f"llama-cpu-t{n}", tmp_path)
    attention = {prov for phase, label, prov, *_ in compiled.info["selection"] if label.endswith(".attn")}
    assert attention == {f"attention_kq_f16kv_ggmlfa_split{n}"}, attention
    bad = np.flatnonzero((got.view(np.uint32) != want.view(np.uint32)).any(1))
    assert bad.size == 0, f"{arch} {preset}: positions differing from llama.cpp -t {n}: {bad[:10].tolist()}"
    one, _, _ = _teacher_forced(fixtures, folder, arch, preset, "llama-cpu", tmp_path)
    diff = np.flatnonzero((one.view(np.uint32) != want.view(np.uint32)).any(1))
    assert diff.size and diff.min() >= 256, f"one-thread order vs -t {n}: differing positions {diff[:10].tolist()}"
