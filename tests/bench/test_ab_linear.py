"""benchmarks/ab_linear.py: builds one linear variant from a git revision and from the working tree, times them
interleaved and says whether both wrote the same bytes; bad arguments get a one-line error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "benchmarks" / "ab_linear.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_ab_linear_times_both_builds_and_compares_their_bytes():
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    for threads in ("1", "3"):  # 3: a team whose parts (ith of 3 over 24 columns) all write their outputs
        r = _run("--provider", "linear_q8_0_q8_0_ggml", "--variant", "ref", "--shape", "2x24x64", "--reps", "20",
                 "--threads", threads)
        assert r.returncode == 0, r.stderr
        assert "A (rev)" in r.stdout and "B (tree)" in r.stdout, r.stdout
        assert "same output bytes: yes" in r.stdout, r.stdout


def test_ab_linear_refuses_unknown_provider_variant_and_shape():
    for args, text in ((("--provider", "nope", "--variant", "ref", "--shape", "1x8x32"), "no such provider"),
                       (("--provider", "linear_q8_0_q8_0_ggml", "--variant", "zzz", "--shape", "1x8x32"), "has ref"),
                       (("--provider", "linear_q8_0_q8_0_ggml", "--variant", "ref", "--shape", "1x8"), "expected MxNxK"),
                       (("--provider", "rmsnorm_f32", "--variant", "ref", "--shape", "1x8x32"), None),
                       # 4096 copies of a 671 MB f32 LM head: refused before anything is allocated
                       (("--provider", "linear_f32_f32_ggml", "--variant", "ref", "--shape", "1x262144x640",
                         "--cold", "4096"), "more than half of the")):
        r = _run(*args)
        assert r.returncode in (1, 2), (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith("error: "), r.stderr
        if text:
            assert text in r.stderr, r.stderr
