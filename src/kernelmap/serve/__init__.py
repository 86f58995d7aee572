"""`kernelmap serve`: an OpenAI-compatible HTTP server with batched decoding of concurrent requests.

protocol.py (the OpenAI wire format) -> engine.py (the scheduler: KV slots, one batched decode step for
every active sequence) -> app.py (Starlette routes, streaming, metrics) -> server.py (compile, load,
uvicorn, graceful shutdown); ray_app.py runs replicas behind one endpoint with Ray Serve. Needs the
`serve` extra (pip install 'kernelmap[serve]').
"""

from __future__ import annotations

__all__ = ["ServeOptions", "build_state", "run"]

from kernelmap.serve.server import ServeOptions, build_state, run
