"""CLI over a tiny synthetic model: run --json, explain -m (with fusions and why-not), and bad input exits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from synth_model import write_synth_model


def _km(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelmap", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return write_synth_model(tmp_path_factory.mktemp("cli") / "s.gguf")


def test_run_json_reports_tokens_and_speed(synth):
    proc = _km("run", "-m", str(synth), "-p", "the cat", "-n", "4", "-t", "2", "-c", "64", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["prompt_tokens"] >= 2 and out["generated_tokens"] >= 1 and out["threads"] == 2


def test_run_n_minus_one_generates_until_a_stop_token_or_a_full_context(synth):
    """-n -1 is llama.cpp's "infinity": the run ends at a stop token or when the context is full, never by
    length; greedy, so the same run twice gives the same tokens."""
    runs = []
    for _ in range(2):
        proc = _km("run", "-m", str(synth), "-p", "the cat", "-n", "-1", "-t", "1", "-c", "24", "--json")
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    out = runs[0]
    assert out["stop_reason"] in ("context full", "stop token"), out
    assert 1 <= out["generated_tokens"] <= 24 - out["prompt_tokens"] + 1
    if out["stop_reason"] == "context full":
        assert out["prompt_tokens"] + out["generated_tokens"] == 24 + 1  # the last token is sampled, not decoded
    assert runs[1]["tokens"] == out["tokens"]


def test_run_repeat_last_n_window_and_ctx_size_alias(synth):
    """--repeat-last-n as llama.cpp reads it: 0 turns the repeat penalty off (the tokens of no penalty), -1 is the
    whole context (with a 64-token context, the tokens of 64); --ctx-size is -c's llama.cpp spelling."""
    def tokens(*args: str) -> list[int]:
        proc = _km("run", "-m", str(synth), "-p", "the cat", "-n", "12", "-t", "1", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["tokens"]

    plain = tokens("-c", "64")
    assert tokens("-c", "64", "--repeat-penalty", "3", "--repeat-last-n", "0") == plain
    assert tokens("--ctx-size", "64", "--repeat-penalty", "3", "--repeat-last-n", "-1") == \
        tokens("-c", "64", "--repeat-penalty", "3", "--repeat-last-n", "64")
    bad = _km("run", "-m", str(synth), "-p", "x", "--repeat-last-n", "-2")
    assert bad.returncode == 2 and "-2 is not in the range x>=-1" in bad.stderr


def test_explain_model_lists_fusions_and_answers_why_not(synth):
    proc = _km("explain", "-m", str(synth))
    assert proc.returncode == 0, proc.stderr
    assert "fusions:" in proc.stdout and "applied" in proc.stdout
    why = _km("explain", "-m", str(synth), "--op", "decode:blk.0.attn_q", "--provider", "linear_q8_0_q8_0")
    assert why.returncode == 0, why.stderr
    assert "contract_mismatch" in why.stdout


def test_explain_json_is_the_trace(synth):
    proc = _km("explain", "-m", str(synth), "--json")
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "kernelmap.selection_trace/1"
    assert all(e["selected"] for e in doc["entries"])


def test_run_option_value_out_of_its_range_is_a_usage_error(synth):
    proc = _km("run", "-m", str(synth), "-p", "x", "-c", "0")
    assert proc.returncode == 2, proc.stderr
    assert "Invalid value for '-c' / '--ctx' / '--ctx-size': 0 is not in the range x>=1." in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("args,fragment", [
    (("run", "-p", "x", "--temp", "-1"), "out of range"),
    (("run", "-p", "x", "--isa", "avx9"), "unknown ISA"),
])
def test_run_bad_input_is_one_line_exit_1(synth, args, fragment):
    proc = _km(args[0], "-m", str(synth), *args[1:])
    assert proc.returncode == 1, proc.stderr
    assert fragment in proc.stderr and "Traceback" not in proc.stderr
