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

import pytest
from batch_check import check_batch_equals_alone

from kernelmap.compiler import CompileOptions, compile_model

SERVE_ROWS = 128  # kernelmap serve's prefill step (serve/server.py SERVE_PREFILL_ROWS)
WINDOW = 512
LENGTHS = [5, 17, 700]
STEPS = 8
N_CTX = 1024


def _prompt(n: int, seed: int) -> list[int]:
    return [2] + [1000 + (seed * 101 + i * 37) % 5000 for i in range(n - 1)]


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
    gemma_serve.set_slots(3)
    prompts = [_prompt(n, i) for i, n in enumerate(LENGTHS)]
    check_batch_equals_alone(gemma_serve, prompts, [1, 2, 0], STEPS, "gemma3")  # slots not in row order
