"""The batched decode phase on the non-Gemma families (committed tiny fixtures of tests/fixtures/families):
every family compiles with a batch phase (so `kernelmap serve` serves it; on main the resolver refused each
with `no provider for op ... in phase batch`), and a sequence decoded in a batch with others gets, at every
step, the very logits bits it gets decoded alone (the decode entry, one token per call). The family ops that needed it have batch providers: bias_add, moe_router/moe_linear/moe_combine and
swiglu's ggml contract declare the batch phase (their rows are independent), rope_ff and attention_kq have
per-row wrappers (batch/*_rows_ref.c: each row is one decode call at its own position and KV slot)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernelmap.compiler import CompileOptions, compile_model

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "families" / "models"
# ref variants keep the compile short; every SIMD variant equals its ref (kernel tests), so the rows do too
OPTIONS = CompileOptions(max_rows=8, batch_rows=3, isa=frozenset())
PROMPTS = ["The capital of France is", "Once upon a time", "1 2 3"]
STEPS = 6


def _alone(model, ids: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
    """Greedy tokens and each decode step's logits of one sequence on its own (slot 0, the decode entry)."""
    logits = model.prefill_slot(0, ids, 0)
    toks, seen = [], []
    for _ in range(steps):
        toks.append(int(np.argmax(logits)))
        logits = model.decode(toks[-1]).copy()
        seen.append(logits)
    return toks, seen


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "phi3", "qwen3moe"])
def test_family_batched_decode_rows_equal_the_sequence_decoded_alone(arch):
    from kernelmap.runtime.model import Model

    model = Model(compile_model(MODELS / f"{arch}-Q4_0.gguf", OPTIONS), n_ctx=32, threads=2)
    try:
        model.set_slots(3)
        prompts = [model.tokenizer.encode(p) for p in PROMPTS]
        assert len({len(p) for p in prompts}) > 1  # the rows sit at different positions
        alone = [_alone(model, ids, STEPS) for ids in prompts]
        slots = [2, 0, 1]  # not in row order
        last, pos = [], []
        for ids, slot in zip(prompts, slots, strict=True):
            last.append(int(np.argmax(model.prefill_slot(slot, ids, 0))))
            pos.append(len(ids))
        for step in range(STEPS):
            rows = model.decode_batch(last, slots, pos).copy()
            for r, (toks, seen) in enumerate(alone):
                assert last[r] == toks[step], (arch, r, step)
                if not np.array_equal(rows[r].view(np.uint32), seen[step].view(np.uint32)):
                    bad = np.flatnonzero(rows[r] != seen[step])[:5]
                    pytest.fail(f"{arch}: row {r} step {step} differs from the sequence alone at logits {bad.tolist()}: "
                                f"{rows[r][bad].tolist()} vs {seen[step][bad].tolist()}")
            last = [int(np.argmax(row)) for row in rows]
            pos = [p + 1 for p in pos]
    finally:
        model.close()

