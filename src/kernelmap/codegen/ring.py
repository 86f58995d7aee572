"""KV layout per state buffer: a ring of a few cells, or the full context — decided from the kernel maps alone.

A KV state buffer holds C cells per head, position j in cell j mod C (the layout every map that declares
`ring` on its state port implements; C >= every position is the full-length layout, so one kernel serves
both). A buffer gets a ring when every op of every phase that touches it binds it through a port declaring
`ring` — "write" (it writes rows pos .. pos+M-1 only) or the name of the int64 param bounding what it reads
(a sliding window: row p reads positions p - window + 1 .. p) with that param positive in the op — and binds
its cell count as runtime:kv_cells. The ring's cells: the largest window plus the most rows one call writes,
minus one (every row of a call reads its window while the call's own rows are already written). The runtime
allocates min(ring, n_ctx) cells. Anything else (a provider without the declaration, window 0, no reader)
keeps the full length: the decision is data, never a name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kernelmap.circuits.graph import StateBuf
from kernelmap.errors import CodegenError
from kernelmap.maps.registry import Registry

if TYPE_CHECKING:
    from kernelmap.codegen.emit import PhasePlan

__all__ = ["ring_cells"]


def ring_cells(plans: Iterable[PhasePlan], registry: Registry, state: list[StateBuf]) -> dict[str, tuple[int, int]]:
    """cname -> (ring cells, window) for every state buffer; (0, 0): the full context."""
    windows: dict[str, int] = {s.cname: 0 for s in state}
    full: set[str] = set()
    rows = 1
    by_op: list[tuple[str, ...]] = []
    for plan in plans:
        rows = max(rows, int(plan.graph.max_rows))
        for op in plan.graph.ops:
            if not op.state:
                continue
            provider = registry.providers[op.provider]
            ports = provider.ports
            cells_bound = any(cp.source == "runtime:kv_cells" for cp in provider.call_abi)
            by_op.append(tuple(op.state.values()))
            for port_name, sname in op.state.items():
                port = ports.get(port_name)
                ring = port.ring if port is not None else None
                if ring is None or not cells_bound:
                    full.add(sname)
                elif ring != "write":
                    window = int(op.params.get(ring, 0) or 0)
                    if window <= 0:
                        full.add(sname)
                    else:
                        windows[sname] = max(windows[sname], window)
    out = {s: (0 if s in full or w == 0 else w + rows - 1) for s, w in windows.items()}
    # one op addresses all its state buffers with one cell count: a mixed op keeps them all full length
    changed = True
    while changed:
        changed = False
        for names in by_op:
            if len({out.get(n, 0) for n in names}) > 1:
                for n in names:
                    changed |= out.get(n, 0) != 0
                    out[n] = 0
    unknown = sorted(set(out) - {s.cname for s in state})
    if unknown:
        raise CodegenError("an op names a state buffer that was not planned", value=unknown[0])
    return {s: (cells, windows[s] if cells else 0) for s, cells in out.items()}
