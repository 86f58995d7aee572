"""`kernelmap run/chat/compile/serve --cache-type-k/-ctk, --cache-type-v/-ctv`: the KV cache type picks the policy, as llama.cpp's
flags pick its cache; anything but the supported equal pairs fails closed with one line naming the option."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelmap.cli.run_cmd import CACHE_POLICIES, cache_policy
from kernelmap.errors import ModelError
from kernelmap.numerics import load_policy


def test_cache_type_flags_pick_the_policy_whose_cache_they_name():
    assert cache_policy(None, None, None) == "llama-cpu"
    assert cache_policy("llama-cpu-t2", None, None) == "llama-cpu-t2"
    assert cache_policy(None, "q8_0", "q8_0") == "llama-cpu-kvq8"
    assert cache_policy(None, "f16", "f16") == "llama-cpu"
    assert cache_policy("llama-cpu-t2", "f16", "f16") == "llama-cpu-t2"  # an explicit policy with that cache
    for kind, policy in CACHE_POLICIES.items():
        assert load_policy(policy).rule_for("attention").kv == kind


@pytest.mark.parametrize(("policy", "k", "v", "pointer"), [
    (None, "q4_0", "q4_0", "--cache-type-k"),
    (None, "q8_0", "q5_1", "--cache-type-v"),
    (None, "q8_0", None, "--cache-type-v"),    # -ctv defaults to f16, as llama.cpp's: a mixed pair
    (None, "f16", "q8_0", "--cache-type-v"),
    ("llama-cpu-t2", "q8_0", "q8_0", "--cache-type-k"),  # that policy keeps an f16 cache
])
def test_unsupported_or_conflicting_cache_types_fail_closed_naming_the_option(policy, k, v, pointer):
    with pytest.raises(ModelError) as exc:
        cache_policy(policy, k, v)
    assert exc.value.pointer == pointer


@pytest.mark.parametrize("command", [["run", "-p", "x"], ["serve"]], ids=["run", "serve"])
def test_cli_rejects_an_unsupported_cache_type_in_one_line(command):
    args = [sys.executable, "-m", "kernelmap", command[0], "-ctk", "q4_0", "-ctv", "q4_0", *command[1:]]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--cache-type-k" in lines[0] and "q4_0" in lines[0] and "q8_0" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
