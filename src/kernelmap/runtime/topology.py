"""Runtime: how many physical cores this process may use (the default thread count).

Input: the CPUs the process may run on (its affinity mask) and the kernel's CPU topology in sysfs
(`/sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_id}`). Output: the number of
distinct (package, core) pairs among those CPUs: SMT siblings of one core count once, because two
threads on one core share its vector units and gain nothing on bandwidth-bound decode. Where the
topology cannot be read, every usable CPU counts as a core.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["SYSFS_CPU", "physical_cores", "usable_cpus"]

SYSFS_CPU = Path("/sys/devices/system/cpu")


def usable_cpus() -> list[int]:
    """The CPU ids this process may run on (its affinity mask), else 0..cpu_count-1."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def physical_cores(cpus: Iterable[int] | None = None, sysfs: Path = SYSFS_CPU) -> int:
    """Distinct physical cores among `cpus` (default: the usable CPUs), at least 1."""
    ids = list(usable_cpus() if cpus is None else cpus)
    cores: set[tuple[int, int]] = set()
    for cpu in ids:
        topo = sysfs / f"cpu{cpu}" / "topology"
        package, core = _read_int(topo / "physical_package_id"), _read_int(topo / "core_id")
        if package is None or core is None:
            return max(1, len(ids))  # no topology: count CPUs
        cores.add((package, core))
    return max(1, len(cores))
