"""tests/aarch64: the cross toolchain fixture (aarch64-linux-gnu-gcc, qemu-aarch64, the arm64 libc)."""

from __future__ import annotations

import pytest
from aarch64_harness import find_toolchain

from kernelmap.target import host_arch


@pytest.fixture(scope="session")
def toolchain():
    """The toolchain, or a skip naming what is missing (`make test` installs it when it can)."""
    found = find_toolchain()
    if isinstance(found, str):
        pytest.skip(found)
    if host_arch() != "x86_64":
        pytest.skip(f"the suite compares qemu-aarch64 runs with native x86_64 runs; this host is {host_arch()}")
    return found
