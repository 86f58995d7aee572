"""benchmarks/e2e.py reports a crashing peer (llama.cpp) as one line, "peer crashed: signal N", exit 1, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("script", "expect"), [
    ("kill -SEGV $$", "error: peer crashed: signal 11 (SIGSEGV) in llama.cpp ("),
    ("echo 'RuntimeError: no model' >&2; exit 3", "error: peer failed (exit 3) in llama.cpp ("),
])
def test_e2e_benchmark_reports_peer_crash_without_traceback(tmp_path, script, expect):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "e2e.py"), "--peer-python", str(fake),
                           "--threads", "1", "--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.startswith(expect), proc.stderr
    assert "Traceback" not in proc.stderr and "\nhint: " in proc.stderr, proc.stderr
