"""Fixtures of the server tests: one tiny synthetic model compiled with a batch phase, served live on
127.0.0.1 (uvicorn in a thread, tests/support/live_server.py) and reached with the official `openai` client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from live_server import Live, start
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions

PARALLEL = 4
CTX = 64
COMPILE = CompileOptions(max_rows=8)  # `kernelmap serve --batch 8 --parallel 4` builds the same library


@pytest.fixture(scope="session")
def synth_gguf(tmp_path_factory) -> Any:
    return write_synth_model(tmp_path_factory.mktemp("serve") / "synth.gguf")


@pytest.fixture(scope="session")
def live(synth_gguf) -> Iterator[Live]:
    from kernelmap.serve import ServeOptions, build_state

    state = build_state(synth_gguf, ServeOptions(parallel=PARALLEL, ctx=CTX, threads=2, compile=COMPILE))
    server = start(state)
    yield server
    server.stop()
