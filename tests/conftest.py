"""Suite-wide test setup: make tests/support importable and give builds an isolated cache.

The kernel and model build caches go to a per-session temporary directory unless KERNELMAP_CACHE
is already set, so the suite never depends on (or pollutes) the user's cache.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

if "KERNELMAP_CACHE" not in os.environ:
    os.environ["KERNELMAP_CACHE"] = tempfile.mkdtemp(prefix="km-test-cache-")


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files (generated C, traces) instead of comparing against them")


def pytest_configure(config):
    """Under KERNELMAP_SANITIZE=1, re-exec pytest with the ASan/UBSan runtimes preloaded."""
    from kernelmap.build.driver import reexec_under_sanitizer

    reexec_under_sanitizer()
