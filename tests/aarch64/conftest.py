"""tests/aarch64: the cross toolchain fixture (aarch64-linux-gnu-gcc, qemu-aarch64, the arm64 libc).

A missing toolchain fails the suite: `make test` installs it (make cross-tools) and the README says it runs the
aarch64 checks, so a silent skip would pass a run that checked less than claimed. KERNELMAP_ALLOW_NO_CROSS=1 turns
the failure into a skip that names what is missing (a machine without root or apt-get).
"""

from __future__ import annotations

import os

import pytest
from aarch64_harness import find_toolchain

from kernelmap.target import host_arch


@pytest.fixture(scope="session")
def toolchain():
    """The toolchain; else a failure naming what is missing (a skip with KERNELMAP_ALLOW_NO_CROSS=1)."""
    found = find_toolchain()
    if isinstance(found, str):
        if os.environ.get("KERNELMAP_ALLOW_NO_CROSS"):
            pytest.skip(f"{found} (KERNELMAP_ALLOW_NO_CROSS set)")
        pytest.fail(f"{found}: run `make cross-tools` (root + apt-get) or set KERNELMAP_ALLOW_NO_CROSS=1 to skip "
                    "tests/aarch64", pytrace=False)
    if host_arch() != "x86_64":
        pytest.skip(f"the suite compares qemu-aarch64 runs with native x86_64 runs; this host is {host_arch()}")
    return found
