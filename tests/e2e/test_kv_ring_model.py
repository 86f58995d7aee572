"""Ring KV caches for sliding-window layers, end to end on the tiny synthetic model (window 8, 8-row prefill).

The default maps declare `ring` on the ggml flash-attention and f16 kv_append kernels, so codegen gives every
windowed layer a ring of window + rows - 1 = 15 cells; the same model built from the same maps with the
`ring` declarations removed keeps the full context. Both must give bit-identical logits at every position,
through prefill chunks and decode steps that wrap the ring several times; a rewind the ring cannot serve is
refused, one it can serve matches the full-length build. The batch phase (serve's one step of several
sequences, each in its own KV slot) declares `ring` too: every slot is a ring of window + rows - 1 cells, its
rows match the full-length build's, and each slot keeps its own rewind guard.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from synth_model import write_synth_model

import kernelmap.compiler as compiler_mod
from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import ModelError
from kernelmap.maps.registry import MAPS_DIR, load_registry
from kernelmap.runtime.model import Model

N_CTX = 64
TOKENS = [2] + [270 + (i * 7) % 40 for i in range(58)]  # positions 0 .. 58: the 15-cell ring wraps 3 times
BATCH = 3  # rows of the batch phase: the ring is window + max(prefill rows, batch rows) - 1 = 15 cells
OPTIONS = CompileOptions(max_rows=8, batch_rows=BATCH)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("ring")
    gguf = write_synth_model(d / "w8.gguf", window=8)
    ring = Model(compile_model(gguf, OPTIONS), n_ctx=N_CTX, threads=2)
    plain = d / "maps"
    plain.mkdir()
    for f in MAPS_DIR.glob("*.json"):
        doc = json.loads(f.read_text(encoding="utf-8"))
        for port in doc.get("inputs", []) + doc.get("outputs", []):
            port.pop("ring", None)
        (plain / f.name).write_text(json.dumps(doc), encoding="utf-8")
    for f in MAPS_DIR.iterdir():
        if f.is_file() and f.suffix != ".json":
            shutil.copy(f, plain / f.name)
    mp = pytest.MonkeyPatch()
    mp.setattr(compiler_mod, "load_registry", lambda extra=(): load_registry((plain, *extra), builtin=False))
    try:
        full = Model(compile_model(gguf, OPTIONS), n_ctx=N_CTX, threads=2)
    finally:
        mp.undo()
    yield ring, full
    ring.close()
    full.close()


def test_ring_build_allocates_window_plus_rows_cells_and_full_build_the_context(models):
    ring, full = models
    assert [s["ring"] for s in ring.info["state"]] == [15] * len(ring.info["state"])
    assert [s["ring"] for s in full.info["state"]] == [0] * len(full.info["state"])
    assert ring.kv_bytes * N_CTX == full.kv_bytes * 15


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_ring_logits_equal_full_length_at_every_position_past_the_wrap(models, threads):
    ring2, full = models
    ring = Model(ring2.compiled, n_ctx=N_CTX, threads=threads)
    bad = []
    try:
        full.reset()
        a, b = ring.prefill(TOKENS[:20]).copy(), full.prefill(TOKENS[:20]).copy()  # chunks of 8, 8, 4 rows
        if a.tobytes() != b.tobytes():
            bad.append(19)
        for p in range(20, len(TOKENS)):
            a, b = ring.decode(TOKENS[p]).copy(), full.decode(TOKENS[p]).copy()
            if a.tobytes() != b.tobytes():
                bad.append(p)
    finally:
        ring.close()
    assert not bad, f"ring on {threads} threads vs full length on 2: logits differ at positions {bad[:8]}"


def test_ring_rewind_within_the_ring_matches_full_and_deeper_rewind_is_refused(models):
    ring, full = models
    for m in (ring, full):
        m.reset()
        m.prefill(TOKENS[:40])
        m.pos = 37  # re-run the last 3 positions: their window is still in the ring
    a, b = ring.prefill(TOKENS[37:40]).copy(), full.prefill(TOKENS[37:40]).copy()
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    ring.pos = 20
    with pytest.raises(ModelError, match="sliding-window ring"):
        ring.prefill(TOKENS[20:22])
    ring.reset()  # a new sequence from position 0 is always served
    assert np.isfinite(ring.prefill(TOKENS[:3])).all()


def _batch_run(model, starts: list[int], steps: int) -> list[np.ndarray]:
    """Three sequences (slots 2, 0, 1) prefilled to different lengths, then `steps` batched decode steps
    feeding TOKENS; the logits rows of every step."""
    model.set_slots(BATCH)
    slots = [2, 0, 1]
    for slot, n in zip(slots, starts, strict=True):
        model.prefill_slot(slot, TOKENS[:n], 0)
    out = []
    for step in range(steps):
        pos = [n + step for n in starts]
        out.append(model.decode_batch([TOKENS[p] for p in pos], slots, pos).copy())
    return out


def test_batch_phase_slots_are_rings_and_rows_equal_full_length_past_the_wrap(models):
    ring, full = models
    assert ring.max_batch == BATCH
    starts = [5, 17, 11]  # every slot wraps its 15-cell ring at least twice below
    steps = len(TOKENS) - max(starts)
    a, b = _batch_run(ring, starts, steps), _batch_run(full, starts, steps)
    assert ring.kv_bytes * N_CTX == full.kv_bytes * 15  # per slot: ring cells, not the context
    bad = [(s, r) for s in range(steps) for r in range(BATCH) if a[s][r].tobytes() != b[s][r].tobytes()]
    assert not bad, f"batched ring rows differ from the full-length build at (step, row) {bad[:8]}"


def test_batch_phase_rewind_guard_is_per_slot(models):
    ring, _ = models
    _batch_run(ring, [5, 17, 11], 30)  # slots 2, 0, 1 now hold positions up to 34, 46, 40
    with pytest.raises(ModelError, match="sliding-window ring"):
        ring.decode_batch([TOKENS[20]], [0], [20])  # slot 0's keys 13 .. 19 were overwritten
    # slot 2 continues where it stopped, slot 1 re-runs its last position (its window is still there)
    rows = ring.decode_batch([TOKENS[35], TOKENS[40]], [2, 1], [35, 40])
    assert np.isfinite(rows).all()
    ring.prefill_slot(0, TOKENS[:3], 0)  # a new sequence at position 0 is always served
    with pytest.raises(ModelError, match="sliding-window ring"):
        ring.prefill_slot(1, TOKENS[10:12], 10)  # slot 1's own guard, through the prefill entry


def test_batch_phase_q8_0_cache_rows_equal_decode(tmp_path):
    """Policy llama-cpu-kvq8 in the batch phase (serve): the q8_0 rows wrappers (kv_append_q8_0_rot{k,v}_rows,
    attention_q8_0kv_rot_ggmlfa_rows) give each batched row exactly the logits of its sequence decoded alone,
    with every slot a ring of q8_0 rows that wraps at least twice, and the slots take 34 bytes per 32 values."""
    gguf = write_synth_model(tmp_path / "w8d64.gguf", window=8, head_dim=64)
    q8 = Model(compile_model(gguf, CompileOptions(max_rows=8, batch_rows=BATCH, policy="llama-cpu-kvq8")),
               n_ctx=N_CTX, threads=2)
    try:
        batch = {row[2] for row in q8.info["selection"] if row[0] == "batch"}  # (phase, op, provider, ...)
        assert {"kv_append_q8_0_rotk_rows", "kv_append_q8_0_rotv_rows", "attention_q8_0kv_rot_ggmlfa_rows"} <= batch
        assert [s["ring"] for s in q8.info["state"]] == [15] * len(q8.info["state"])
        assert {s["dtype"] for s in q8.info["state"]} == {"q8_0"}
        assert q8.kv_bytes == sum(s["heads"] * 15 * s["dim"] // 32 * 34 for s in q8.info["state"])  # q8_0 rows
        starts = [5, 17, 11]
        steps = len(TOKENS) - max(starts)
        rows = _batch_run(q8, starts, steps)
        bad = []
        for i, n in enumerate(starts):
            solo = Model(q8.compiled, n_ctx=N_CTX, threads=2)
            try:
                solo.prefill(TOKENS[:n])
                for s in range(steps):
                    if solo.decode(TOKENS[n + s]).tobytes() != rows[s][i].tobytes():
                        bad.append((s, i))
            finally:
                solo.close()
        assert not bad, f"q8_0-cache batched rows differ from their sequences decoded alone at (step, row) {bad[:8]}"
    finally:
        q8.close()
