"""The batched decode phase on the non-Gemma families (committed tiny fixtures of tests/fixtures/families):
every family compiles with a batch phase (so `kernelmap serve` serves it; on main the resolver refused each
with `no provider for op ... in phase batch`), and a sequence decoded in a batch with others gets, at every
step, the very logits bits it gets decoded alone (the decode entry, one token per call). The family ops that needed it have batch providers: bias_add, moe_router/moe_linear/moe_combine and
swiglu's ggml contract declare the batch phase (their rows are independent), rope_ff and attention_kq have
per-row wrappers (batch/*_rows_ref.c: each row is one decode call at its own position and KV slot)."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_check import check_batch_equals_alone

from kernelmap.compiler import CompileOptions, compile_model

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "families" / "models"
# ref variants keep the compile short; every SIMD variant equals its ref (kernel tests), so the rows do too
OPTIONS = CompileOptions(max_rows=8, batch_rows=3, isa=frozenset())
PROMPTS = ["The capital of France is", "Once upon a time", "1 2 3"]
STEPS = 6


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "phi3", "qwen3moe"])
def test_family_batched_decode_rows_equal_the_sequence_decoded_alone(arch):
    from kernelmap.runtime.model import Model

    model = Model(compile_model(MODELS / f"{arch}-Q4_0.gguf", OPTIONS), n_ctx=32, threads=2)
    try:
        model.set_slots(3)
        prompts = [model.tokenizer.encode(p) for p in PROMPTS]
        assert len({len(p) for p in prompts}) > 1  # the rows sit at different positions
        check_batch_equals_alone(model, prompts, [2, 0, 1], STEPS, arch)  # slots not in row order
    finally:
        model.close()

