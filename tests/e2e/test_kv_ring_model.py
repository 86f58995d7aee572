"""Ring KV caches for sliding-window layers, end to end on the tiny synthetic model (window 8, 8-row prefill).

The default maps declare `ring` on the ggml flash-attention and f16 kv_append kernels, so codegen gives every
windowed layer a ring of window + rows - 1 = 15 cells; the same model built from the same maps with the
`ring` declarations removed keeps the full context. Both must give bit-identical logits at every position,
through prefill chunks and decode steps that wrap the ring several times; a rewind the ring cannot serve is
refused, one it can serve matches the full-length build.
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


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("ring")
    gguf = write_synth_model(d / "w8.gguf", window=8)
    ring = Model(compile_model(gguf, CompileOptions(max_rows=8)), n_ctx=N_CTX, threads=2)
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
        full = Model(compile_model(gguf, CompileOptions(max_rows=8)), n_ctx=N_CTX, threads=2)
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
