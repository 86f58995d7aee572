"""Shared by the batched-decode tests (tests/serve): a sequence decoded alone, and a batch checked against it."""

from __future__ import annotations

import numpy as np
import pytest


def decode_alone(model, ids: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
    """Greedy tokens and each decode step's logits of one sequence on its own (slot 0, the decode entry)."""
    logits = model.prefill_slot(0, ids, 0)
    toks, seen = [], []
    for _ in range(steps):
        toks.append(int(np.argmax(logits)))
        logits = model.decode(toks[-1]).copy()
        seen.append(logits)
    return toks, seen


def check_batch_equals_alone(model, prompts: list[list[int]], slots: list[int], steps: int, name: str) -> None:
    """Prefill each prompt into its slot, then `steps` batched decode steps: at every step row r must carry the
    greedy token and, bit for bit, the logits of prompt r decoded alone."""
    alone = [decode_alone(model, ids, steps) for ids in prompts]
    last, pos = [], []
    for ids, slot in zip(prompts, slots, strict=True):
        last.append(int(np.argmax(model.prefill_slot(slot, ids, 0))))
        pos.append(len(ids))
    for step in range(steps):
        rows = model.decode_batch(last, slots, pos).copy()
        for r, (toks, seen) in enumerate(alone):
            assert last[r] == toks[step], (name, r, step)
            if not np.array_equal(rows[r].view(np.uint32), seen[step].view(np.uint32)):
                bad = np.flatnonzero(rows[r] != seen[step])[:5]
                pytest.fail(f"{name}: row {r} (prompt of {len(prompts[r])}) step {step} differs from the sequence "
                            f"alone at logits {bad.tolist()}: {rows[r][bad].tolist()} vs {seen[step][bad].tolist()}")
        last = [int(np.argmax(row)) for row in rows]
        pos = [p + 1 for p in pos]
