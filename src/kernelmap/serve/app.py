"""The HTTP layer: a Starlette app speaking OpenAI's API in front of an `Engine`.

Routes: POST /v1/completions and /v1/chat/completions (JSON, or server-sent events with `stream`),
GET /v1/models, /health and /metrics (Prometheus text). Input: HTTP requests; output: OpenAI-shaped
responses, chunks and errors ({"error": {message, type, param, code}} with 400, 404, 413, 503 ...).
A client that disconnects (mid-stream or while waiting) cancels its request, which frees its KV slot.
It does not run the model (engine.py) nor parse sampling (protocol.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kernelmap.maps.loader import MAX_JSON_DEPTH, too_deep
from kernelmap.serve.engine import Engine, Handle
from kernelmap.serve.metrics import CONTENT_TYPE, Metrics
from kernelmap.serve.protocol import (
    APIError,
    GenRequest,
    Limits,
    chat_chunk,
    chat_response,
    completion_chunk,
    completion_response,
    parse_chat,
    parse_completion,
    usage,
)

__all__ = ["ServeState", "create_app", "MAX_BODY_BYTES", "REPLICA_HEADER"]

MAX_BODY_BYTES = 4 << 20
REPLICA_HEADER = "x-kernelmap-replica"


@dataclass
class ServeState:
    """What the routes share: the engine, the limits, the tokenizer and template, and the metrics."""

    engine: Engine
    limits: Limits
    tokenizer: Any
    template: Any
    metrics: Metrics
    max_body: int = MAX_BODY_BYTES
    started: int = 0
    replica: str | None = None  # set under Ray Serve (ray_app.py): /health and a header on every response name it


def _error(exc: APIError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


async def _json_body(request: Request, state: ServeState) -> Any:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > state.max_body:
        raise APIError(413, f"request body of {length} bytes is larger than {state.max_body}",
                       code="request_too_large")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > state.max_body:
            raise APIError(413, f"request body is larger than {state.max_body} bytes", code="request_too_large")
    try:
        depth = too_deep(bytes(raw).decode("utf-8", errors="replace"))
        if depth is None:
            return json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        raise APIError(400, f"We could not parse the JSON body of your request ({exc})",
                       code="invalid_json") from None
    except RecursionError:
        depth = None
    raise APIError(400, "We could not parse the JSON body of your request (nested too deeply: "
                   + (f"{depth} levels, at most {MAX_JSON_DEPTH})" if depth else "too many levels)"), code="invalid_json")


async def _disconnected(request: Request) -> None:
    """Return when the client disconnects (the body has been read, so the next message is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _stream(handle: Handle, state: ServeState) -> AsyncIterator[bytes]:
    req, model = handle.req, state.limits.model_id
    chat = req.kind == "chat"
    try:
        if chat:
            yield _sse(chat_chunk(req, model, {"role": "assistant", "content": ""}, None))
        async for ev in handle.events():
            if ev.kind == "text":
                yield _sse(chat_chunk(req, model, {"content": ev.text}, None) if chat
                           else completion_chunk(req, model, ev.text, None))
            elif ev.kind == "done":
                yield _sse(chat_chunk(req, model, {}, ev.finish) if chat
                           else completion_chunk(req, model, "", ev.finish))
                if req.include_usage:
                    use = usage(ev.prompt_tokens, ev.completion_tokens)
                    yield _sse(chat_chunk(req, model, {}, None, use) if chat
                               else completion_chunk(req, model, "", None, use))
            else:
                assert ev.error is not None
                yield _sse(ev.error.body())
        yield b"data: [DONE]\n\n"
    finally:  # finished, or the client left (the response task was cancelled / the generator closed)
        handle.cancel()


async def _collect(handle: Handle, request: Request) -> tuple[str, str, int]:
    parts: list[str] = []

    async def consume() -> tuple[str, int]:
        async for ev in handle.events():
            if ev.kind == "text":
                parts.append(ev.text)
            elif ev.kind == "done":
                return ev.finish, ev.completion_tokens
            else:
                assert ev.error is not None
                raise ev.error
        raise APIError(500, "the request ended without a result", type="server_error")

    work = asyncio.ensure_future(consume())
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()
            handle.cancel()
    if not work.done() or work.cancelled():
        raise APIError(499, "client closed the request", code="client_closed")
    finish, n_out = work.result()
    return "".join(parts), finish, n_out


async def _generate(request: Request, kind: str) -> Response:
    state: ServeState = request.app.state.serve
    endpoint = request.url.path
    status = 200
    try:
        body = await _json_body(request, state)
        req: GenRequest = (parse_chat(body, state.tokenizer, state.template, state.limits) if kind == "chat"
                           else parse_completion(body, state.tokenizer, state.limits))
        handle = state.engine.submit(req)
        if req.stream:
            return StreamingResponse(_stream(handle, state), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        text, finish, n_out = await _collect(handle, request)
        build = chat_response if kind == "chat" else completion_response
        return JSONResponse(build(req, state.limits.model_id, text, finish, n_out))
    except APIError as exc:
        status = exc.status
        return _error(exc)
    finally:
        state.metrics.requests.labels(endpoint, str(status)).inc()


async def completions(request: Request) -> Response:
    return await _generate(request, "completion")


async def chat_completions(request: Request) -> Response:
    return await _generate(request, "chat")


async def models(request: Request) -> Response:
    state: ServeState = request.app.state.serve
    state.metrics.requests.labels("/v1/models", "200").inc()
    return JSONResponse({"object": "list", "data": [{"id": state.limits.model_id, "object": "model",
                                                     "created": state.started, "owned_by": "kernelmap"}]})


async def health(request: Request) -> Response:
    state: ServeState = request.app.state.serve
    return JSONResponse({"status": "ok", "model": state.limits.model_id, "pid": os.getpid(),
                         **({"replica": state.replica} if state.replica else {}), **state.engine.stats()})


async def metrics(request: Request) -> Response:
    state: ServeState = request.app.state.serve
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found" if exc.status_code == 404 else "method_not_allowed" if exc.status_code == 405 else None
    message = (f"no route {request.method} {request.url.path}" if exc.status_code in (404, 405)
               else str(exc.detail))
    return _error(APIError(exc.status_code, message, code=kind))


def create_app(state: ServeState, *, close_engine: bool = True) -> Starlette:
    """The Starlette app over `state`; with `close_engine`, its lifespan end closes the engine."""
    state.started = state.started or int(time.time())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if close_engine:
            await asyncio.get_running_loop().run_in_executor(None, state.engine.close)

    app = Starlette(routes=[
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ], exception_handlers={HTTPException: _http_error}, lifespan=lifespan,
        middleware=[Middleware(_ReplicaHeader, replica=state.replica)] if state.replica else None)
    app.state.serve = state
    return app


class _ReplicaHeader:
    """ASGI middleware: every response carries `x-kernelmap-replica: <replica id>` (streams too)."""

    def __init__(self, app: Any, replica: str) -> None:
        self.app = app
        self.header = (REPLICA_HEADER.encode(), replica.encode())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_with_header)
