"""The real default model end to end: compile, generate, and agree with llama.cpp's committed fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelmap.parity import tier1, tier2

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "llama_fa"  # flash attention, one token per decode


@pytest.fixture(scope="module")
def gemma():
    from kernelmap.runtime import default_model_path, load

    m = load(default_model_path(), threads=2, n_ctx=1024)
    yield m
    m.close()


def test_real_model_tier1_self_consistency(gemma):
    tokens = gemma.tokenizer.encode("The quick brown fox jumps over the lazy dog because it")
    for check in tier1(gemma, tokens):
        assert check.passed, check


def test_real_model_greedy_and_teacher_forced_agree_with_llama_cpp(gemma):
    checks = {c.name.split(" over ")[0]: c for c in tier2(gemma, FIXTURES)}
    report = {k: c.value for k, c in checks.items()}
    greedy = checks["greedy continuations identical to llama.cpp"]
    teacher = checks["teacher-forced top-1 agreement"]
    assert greedy.passed, report
    assert teacher.passed, report


def test_real_model_first_token_logits_close_to_llama_cpp(gemma):
    fixture = json.loads((FIXTURES / "greedy.json").read_text())
    case = fixture["prompts"][0]
    logits = gemma.logits(case["tokens"])
    top = case["top_logits"][0]
    ours = logits[np.asarray(top["ids"])]
    np.testing.assert_allclose(ours, np.asarray(top["values"]), atol=0.5)


def test_run_cli_generates_text_and_reports_speed():
    proc = subprocess.run([sys.executable, "-m", "kernelmap", "run", "-p", "The capital of France is", "-n", "8",
                           "-t", "2", "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["generated_tokens"] >= 1 and out["decode_tokens_per_s"] >= 0
    assert out["text"].strip() and out["text"].isprintable()
