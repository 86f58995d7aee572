"""Start-up and shutdown: compile and load a model for serving, then run the app under uvicorn.

Input: a GGUF path and the serving options (parallel sequences, context per sequence, threads, queue
bound). Output: a `ServeState` (engine + limits + tokenizer), and `run` serving it until SIGTERM or
SIGINT: then no new requests are accepted (503), waiting ones are told, active ones finish (or are
told at the end of the grace period), and the model is freed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelmap.compiler import CompileOptions

__all__ = ["MAX_GRACE", "SERVE_CTX", "SERVE_PREFILL_ROWS", "ServeOptions", "build_state", "check_options", "compile_options", "model_id_for", "run"]


# Prefill rows per step when serving: 128, not the 512 of `kernelmap run` (compiler.DEFAULT_PREFILL_ROWS). Every KV
# slot's sliding-window ring holds window + rows - 1 cells, so --parallel slots multiply the rows' share (Gemma 3
# 270M, 8 slots at --ctx 8192: 267 MiB of KV at 128 rows, 312 at 512), and a prefill step holds up the other
# requests' batched decode for its duration (a 512-row step is ~4x a 128-row one).
SERVE_PREFILL_ROWS = 128
# The context per sequence when none is asked for (the model's trained context when that is shorter).
SERVE_CTX = 2048
# Longest grace period after SIGTERM: a day. A finite bound, as uvicorn's timeout and the engine's deadline
# need a finite number of seconds (nan or inf failed there, after the model was compiled).
MAX_GRACE = 86400.0


@dataclass(frozen=True)
class ServeOptions:
    """How to serve: sequences decoded together, KV context per sequence (None: SERVE_CTX, or the model's trained
    context when shorter), threads, queue bound, grace."""

    parallel: int = 4
    ctx: int | None = SERVE_CTX
    threads: int | None = None
    queue: int = 64
    grace: float = 30.0
    compile: CompileOptions = CompileOptions(max_rows=SERVE_PREFILL_ROWS)
    model_id: str | None = None


def model_id_for(path: str | Path) -> str:
    """The id clients use for a model: the GGUF file name without .gguf."""
    name = Path(path).name
    return name[:-5] if name.lower().endswith(".gguf") else name


def check_options(options: ServeOptions) -> None:
    """Refuse serving options out of range (ModelError naming the flag)."""
    from kernelmap.errors import ModelError

    if not 1 <= options.parallel <= 64:
        raise ModelError("parallel sequences out of range", pointer="--parallel", value=options.parallel,
                         expected="1..64")
    if options.queue < 0:
        raise ModelError("queue bound must be >= 0", pointer="--queue", value=options.queue)
    if not 0 <= options.grace <= MAX_GRACE:  # false for nan too
        raise ModelError("grace period out of range", pointer="--grace", value=options.grace,
                         expected=f"0..{MAX_GRACE:g} seconds")
    if options.ctx is not None and options.ctx < 1:
        raise ModelError("context length out of range", pointer="--ctx", value=options.ctx, expected=">= 1")


def compile_options(options: ServeOptions) -> CompileOptions:
    """The compile options of a served model: the given ones with a batch phase of `parallel` rows."""
    from dataclasses import replace

    return replace(options.compile, batch_rows=options.parallel)


def build_state(gguf: str | Path, options: ServeOptions, progress: Callable[[str], None] | None = None) -> Any:
    """Compile (cached) with a batch phase of `parallel` rows, load, and start the engine."""
    from kernelmap.compiler import compile_model
    from kernelmap.runtime.model import Model
    from kernelmap.serve.app import ServeState
    from kernelmap.serve.engine import Engine
    from kernelmap.serve.metrics import Metrics
    from kernelmap.serve.protocol import Limits

    check_options(options)
    compiled = compile_model(gguf, compile_options(options), progress=progress)
    ctx = options.ctx if options.ctx is not None else min(SERVE_CTX, int(compiled.info["config"]["ctx_train"]))
    model = Model(compiled, n_ctx=ctx, threads=options.threads)
    metrics = Metrics()
    try:
        engine = Engine(model, parallel=options.parallel, queue_size=options.queue, metrics=metrics)
    except BaseException:
        model.close()
        raise
    limits = Limits(model_id=options.model_id or model_id_for(gguf), n_ctx=model.n_ctx)
    return ServeState(engine, limits, model.tokenizer, model.chat_template, metrics)


def run(state: Any, *, host: str, port: int, grace: float, log_level: str = "warning") -> None:
    """Serve `state` with uvicorn until a signal; shut down gracefully (see the module docstring)."""
    import uvicorn

    from kernelmap.serve.app import create_app

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            state.engine.begin_shutdown(grace)
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets)  # ends with the app's lifespan: the engine is closed
            # uvicorn then re-raises the signal, so the exit status is the conventional "ended by SIGTERM"
            print("kernelmap serve: stopped", file=sys.stderr, flush=True)

    config = uvicorn.Config(create_app(state), host=host, port=port, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=int(grace) + 2, lifespan="on")
    server = _Server(config)
    print(f"kernelmap serve: {state.limits.model_id} on http://{host}:{port}/v1 "
          f"({state.engine.parallel} parallel, ctx {state.limits.n_ctx}, threads {state.engine.model.threads})",
          file=sys.stderr, flush=True)
    server.run()
