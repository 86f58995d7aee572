"""The reference forward pass on the real model: config from metadata, cache consistency, agreement with llama.cpp.

The llama.cpp numbers come from the committed fixtures (tests/fixtures/llama, written by
tests/fixtures/make_llama_fixtures.py). A greedy continuation is checked in one teacher-forced prefill
of prompt + continuation: it is identical iff every step's argmax equals the recorded token.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernelmap.errors import ModelError

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llama"
TEACHER_TOKENS_IN_TESTS = 256  # `make parity` uses all 512

# Why the thresholds are xfail for the NumPy reference: it is a float64 oracle (exact integer dots
# rounded once), not llama.cpp's arithmetic, and llama.cpp does not meet these bars even against itself:
# evaluated one token at a time instead of in one batch (these fixtures), it agrees with its own batched
# teacher-forced top-1 on 95.5% of the 512 positions and 0 of the 5 greedy continuations stay identical.
# Last-bit differences change the q8 activation codes, which acts as fresh noise of ~0.2 on the logits;
# only a bit-exact copy of llama.cpp's path tracks it. The compiled model with the default llama-cpu
# policy is that copy and meets the bars (5/5, 100%): tests/e2e/test_real_model.py.
_NOISE_FLOOR = ("the float64 reference is below llama.cpp's own batched-vs-sequential agreement (95.5% top-1, "
                "0/5 greedy); the bit-exact compiled model meets the bars (tests/e2e/test_real_model.py)")


@pytest.fixture(scope="module")
def ref(model_path):
    from kernelmap.reference.forward import Reference

    return Reference(model_path, n_ctx=640)


@pytest.fixture(scope="module")
def greedy_fixture():
    return json.loads((FIXTURES / "greedy.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def teacher_fixture():
    return json.loads((FIXTURES / "teacher.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def greedy_result(ref, greedy_fixture):
    rows = []
    for p in greedy_fixture["prompts"]:
        toks = p["tokens"] + p["continuation"]
        n0 = len(p["tokens"])
        logits = ref.prefill(toks[:-1], list(range(n0 - 1, len(toks) - 1)))
        match = logits.argmax(axis=-1) == np.asarray(p["continuation"])
        rows.append({"identical": bool(match.all()),
                     "first_divergence": int(np.argmin(match)) if not match.all() else len(match),
                     "logits": logits[: len(p["top_logits"])]})
    print("reference greedy vs llama.cpp:",
          [(r["identical"], r["first_divergence"]) for r in rows])
    return rows


@pytest.fixture(scope="module")
def teacher_agreement(ref, teacher_fixture):
    toks = teacher_fixture["tokens"][:TEACHER_TOKENS_IN_TESTS]
    pred = ref.prefill(toks, "all").argmax(axis=-1)
    agree = float((pred == np.asarray(teacher_fixture["top1"][: len(toks)])).mean())
    print(f"reference teacher-forced top-1 agreement over {len(toks)} tokens: {agree:.4f}")
    return agree


def test_reference_config_comes_from_gguf_metadata(ref):
    cfg = ref.config
    assert (cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["n_head_kv"], cfg["head_dim"]) == (18, 640, 4, 1, 256)
    assert cfg["sliding_window"] == 512 and cfg["rope_freq_base"] == 1e6


def test_reference_layer_attrs_make_every_sixth_layer_full_attention(ref):
    full = [i for i in range(ref.config["n_layer"]) if not ref.layer_attrs(i)["sliding"]]
    assert full == [5, 11, 17]
    assert ref.layer_attrs(0) == {"sliding": True, "window": 512, "freq_base": 10000.0, "freq_scale": 1.0}
    assert ref.layer_attrs(5)["freq_base"] == 1e6 and ref.layer_attrs(5)["window"] == 0


def test_reference_prefill_equals_prefill_then_decode_steps(ref, greedy_fixture):
    toks = greedy_fixture["prompts"][2]["tokens"][:10]
    full = ref.prefill(toks, "all")
    part = [ref.prefill(toks[:6], "all")[-1]] + [ref.decode(t) for t in toks[6:]]
    np.testing.assert_allclose(np.asarray(part), full[5:], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(ref.logits(toks), full[-1])


def test_reference_rejects_tokens_beyond_its_context(ref):
    with pytest.raises(ModelError):
        ref.prefill([2] * (ref.n_ctx + 1), "last")


def test_reference_top_logits_are_close_to_llama_cpp(greedy_result, greedy_fixture):
    diffs = []
    for res, p in zip(greedy_result, greedy_fixture["prompts"], strict=True):
        for step, top in enumerate(p["top_logits"]):
            diffs.append(np.abs(res["logits"][step, top["ids"]] - np.asarray(top["values"])).mean())
    print(f"mean |logit diff| on llama.cpp's top-20: {np.mean(diffs):.4f}")
    assert np.mean(diffs) < 0.5


def test_reference_greedy_first_token_matches_llama_cpp_for_every_prompt(greedy_result):
    assert all(r["first_divergence"] >= 1 for r in greedy_result)


@pytest.mark.xfail(strict=True, reason=_NOISE_FLOOR)
def test_reference_greedy_identical_for_four_of_five_prompts(greedy_result):
    assert sum(r["identical"] for r in greedy_result) >= 4


def test_reference_teacher_forced_top1_agreement_at_least_90_percent(teacher_agreement):
    assert teacher_agreement >= 0.90


@pytest.mark.xfail(strict=True, reason=_NOISE_FLOOR)
def test_reference_teacher_forced_top1_agreement_at_least_99_percent(teacher_agreement):
    assert teacher_agreement >= 0.99
