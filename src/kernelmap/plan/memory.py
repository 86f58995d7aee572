"""Memory planning: assign every activation tensor (and op scratch) an arena offset by liveness.

Input: buffers with a size in bytes and a live interval [first op, last op] in execution order.
Output: 64-byte-aligned offsets such that two buffers overlap in memory only if their live intervals
are disjoint, the arena size, and what one-buffer-per-tensor would have cost. Greedy best-fit,
largest first, ties broken by name, so the plan is deterministic. It does not know what ops do.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelmap.errors import PlanError

__all__ = ["Buffer", "MemoryPlan", "plan_memory", "ALIGN"]

ALIGN = 64


@dataclass(frozen=True)
class Buffer:
    """A buffer to place: bytes needed and the op indices where it is first written and last read."""

    name: str
    size: int
    first: int
    last: int


@dataclass(frozen=True)
class MemoryPlan:
    """Offsets by buffer name, the arena size, and the size without reuse."""

    offsets: dict[str, int]
    size: int
    naive_size: int

    def summary(self) -> str:
        saved = self.naive_size - self.size
        pct = 100.0 * saved / self.naive_size if self.naive_size else 0.0
        return (f"arena {self.size / 2**20:.2f} MiB for {len(self.offsets)} buffers "
                f"(one buffer per tensor: {self.naive_size / 2**20:.2f} MiB; saved {pct:.1f}%)")


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_memory(buffers: list[Buffer]) -> MemoryPlan:
    """Place buffers so that simultaneously live ones never overlap."""
    placed: list[tuple[int, int, Buffer]] = []  # (offset, end, buffer)
    offsets: dict[str, int] = {}
    for buf in buffers:
        if buf.size < 0:
            raise PlanError(f"buffer {buf.name} has a negative size", value=buf.size, expected=">= 0 bytes")
    for buf in sorted(buffers, key=lambda b: (-_align(b.size), b.name)):
        size = _align(max(buf.size, 1))
        busy = sorted((off, end) for off, end, other in placed
                      if not (other.last < buf.first or buf.last < other.first))
        best: tuple[int, int] | None = None  # (gap size, offset)
        cursor = 0
        for off, end in busy:
            if off - cursor >= size and (best is None or off - cursor < best[0]):
                best = (off - cursor, cursor)
            cursor = max(cursor, end)
        offset = best[1] if best is not None else cursor
        placed.append((offset, offset + size, buf))
        offsets[buf.name] = offset
    total = max((end for _, end, _ in placed), default=0)
    naive = sum(_align(max(b.size, 1)) for b in buffers)
    return MemoryPlan(dict(sorted(offsets.items())), total, naive)
