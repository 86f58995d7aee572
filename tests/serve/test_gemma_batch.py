"""Serve's batched decode on the real default model (Gemma 3 270M), built as `kernelmap serve` builds it.

README: "a request's tokens are the same whether it ran alone or batched" and "a sliding-window layer's slot is a
ring of window + rows - 1 cells". tests/serve/test_family_batch.py and tests/e2e/test_kv_ring_model.py show both on
tiny models; here the real model with serve's compile options (128-row prefill steps, so each sliding layer's slot
is a ring of 512 + 128 - 1 = 639 cells) runs three sequences in one batch: a 5-token prompt (row loops), a 17-token
one (the >= 16-row prefill GEMM) and a 700-token one whose ring has wrapped before the batch starts (prefill
chunks of 128 rows write past cell 638). At every step each row's logits must be, bit for bit, the logits of that
sequence decoded alone (the decode entry), and the greedy tokens follow.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelmap.compiler import CompileOptions, compile_model

SERVE_ROWS = 128  # kernelmap serve's prefill step (serve/server.py SERVE_PREFILL_ROWS)
WINDOW = 512
LENGTHS = [5, 17, 700]
STEPS = 8
N_CTX = 1024


def _prompt(n: int, seed: int) -> list[int]:
    return [2] + [1000 + (seed * 101 + i * 37) % 5000 for i in range(n - 1)]


def _alone(model, ids: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
    """Greedy tokens and each decode step's logits of one sequence on its own (slot 0, the decode entry)."""
    logits = model.prefill_slot(0, ids, 0)
    toks, seen = [], []
    for _ in range(steps):
        toks.append(int(np.argmax(logits)))
        logits = model.decode(toks[-1]).copy()
        seen.append(logits)
    return toks, seen


@pytest.fixture(scope="module")
def gemma_serve():
    from kernelmap.runtime import default_model_path
    from kernelmap.runtime.model import Model

    model = Model(compile_model(default_model_path(), CompileOptions(max_rows=SERVE_ROWS, batch_rows=3)),
                  n_ctx=N_CTX, threads=2)
    yield model
    model.close()


def test_gemma_serve_build_rings_are_window_plus_rows(gemma_serve):
    rings = {s["ring"] for s in gemma_serve.info["state"] if s.get("window")}
    assert rings == {WINDOW + SERVE_ROWS - 1}
    assert max(LENGTHS) > WINDOW + SERVE_ROWS - 1, "the long sequence must wrap its ring before the batch"


def test_gemma_batched_rows_equal_each_sequence_decoded_alone(gemma_serve):
    model = gemma_serve
    model.set_slots(3)
    prompts = [_prompt(n, i) for i, n in enumerate(LENGTHS)]
    alone = [_alone(model, ids, STEPS) for ids in prompts]
    slots = [1, 2, 0]  # not in row order
    last, pos = [], []
    for ids, slot in zip(prompts, slots, strict=True):
        last.append(int(np.argmax(model.prefill_slot(slot, ids, 0))))
        pos.append(len(ids))
    for step in range(STEPS):
        rows = model.decode_batch(last, slots, pos).copy()
        for r, (toks, seen) in enumerate(alone):
            assert last[r] == toks[step], (r, step)
            if not np.array_equal(rows[r].view(np.uint32), seen[step].view(np.uint32)):
                bad = np.flatnonzero(rows[r] != seen[step])[:5]
                pytest.fail(f"row {r} (prompt of {LENGTHS[r]}) step {step} differs from the sequence alone at "
                            f"logits {bad.tolist()}: {rows[r][bad].tolist()} vs {seen[step][bad].tolist()}")
        last = [int(np.argmax(row)) for row in rows]
        pos = [p + 1 for p in pos]
