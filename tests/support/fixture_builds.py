"""Op fixtures of two llama.cpp builds (its AVX-512 build and its AVX2 build), each with the policy that claims it.

Shared by the fixture replays that run per build (tests/kernels/test_ops_vs_llama_formats.py, _kquant.py): the
fixture arrays of every build, and whether a build's policy claims an op at all (a refused op is checked to be
needed instead of claimed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernelmap.errors import PolicyError
from kernelmap.numerics.policy import load_policy

__all__ = ["claims", "load_builds"]


def load_builds(builds: dict[str, tuple[Path, str]]) -> dict[str, dict[str, np.ndarray]]:
    """build -> its ops.npz arrays, for builds given as build -> (fixture folder, policy)."""
    out = {}
    for build, (folder, _policy) in builds.items():
        with np.load(folder / "ops.npz") as z:
            out[build] = {k: z[k] for k in z.files}
    return out


def claims(policy: str, op: str, **keys: str) -> bool:
    """Whether `policy` has a rule for the op with these match keys."""
    try:
        load_policy(policy).rule_for(op, **keys)
    except PolicyError:
        return False
    return True
