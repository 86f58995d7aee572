"""The KV-cache sizes the README states for Gemma 3 270M at `--ctx 8192`, read from loaded models.

README: "KV memory at `--ctx 8192` on Gemma 3 270M: 20.7 MiB q8_0 vs 39.0 MiB f16 (ring for the sliding layers,
window + 511 cells with the default 512-row prefill steps; 17.7 vs 33.4 MiB with `-ub 128`)", and for the server
(128-row prefill steps, one ring per slot): "KV for 8 slots at `--ctx 8192` is 267 MiB instead of 1152, and 142 MiB
with `-ctk q8_0 -ctv q8_0`". Each case loads the compiled model at n_ctx 8192 (km_model_create allocates the cells
Model.kv_bytes counts; the ring-wrap tests in test_kv_ring_model.py show those cells are what the program uses) and
checks the bytes against the README's figure at its printed precision, so the README cannot drift from the build.
"""

from __future__ import annotations

import pytest

from kernelmap.compiler import CompileOptions
from kernelmap.runtime import default_model_path, load

MIB = 1 << 20
N_CTX = 8192
WINDOW = 512
SERVE_ROWS = 128   # kernelmap serve's prefill step (serve/server.py SERVE_PREFILL_ROWS)
SERVE_SLOTS = 8

# (policy, prefill rows: None = the default 512, MiB per sequence as the README prints it)
CASES = [
    ("llama-cpu", None, 39.0),
    ("llama-cpu-kvq8", None, 20.7),
    ("llama-cpu", SERVE_ROWS, 33.4),
    ("llama-cpu-kvq8", SERVE_ROWS, 17.7),
]
# kernelmap serve --parallel 8 --ctx 8192: (policy, MiB for the 8 slots, MiB without the ring)
SERVE = {"llama-cpu": (267, 1152), "llama-cpu-kvq8": (142, None)}


def _load(policy: str, rows: int | None):
    opts = CompileOptions(policy=policy) if rows is None else CompileOptions(policy=policy, max_rows=rows)
    return load(str(default_model_path()), threads=1, n_ctx=N_CTX, options=opts)


@pytest.mark.parametrize("policy,rows,mib", CASES, ids=[f"{p}-rows{r or 'default'}" for p, r, _ in CASES])
def test_gemma_kv_bytes_at_ctx_8192_are_the_readme_figures(policy, rows, mib):
    with _load(policy, rows) as model:
        state = model.info["state"]
        step = rows or model.info["max_rows"]
        sliding = [s for s in state if s.get("window")]
        full = [s for s in state if not s.get("window")]
        assert sliding and full, "Gemma 3 has sliding-window and global layers"
        assert {s["window"] for s in sliding} == {WINDOW}
        assert {s["ring"] for s in sliding} == {WINDOW + step - 1}, "a sliding layer's ring: window + rows - 1 cells"
        assert round(model.kv_bytes / MIB, 1) == mib, model.kv_bytes
        if rows == SERVE_ROWS:
            slots, no_ring = SERVE[policy]
            assert round(SERVE_SLOTS * model.kv_bytes / MIB) == slots
            if no_ring is not None:  # every layer at the full context: what the ring saves
                per_cell = model.kv_bytes / sum(s["heads"] * (s.get("ring") or N_CTX) for s in state)
                full_bytes = per_cell * sum(s["heads"] * N_CTX for s in state)
                assert round(SERVE_SLOTS * full_bytes / MIB) == no_ring
