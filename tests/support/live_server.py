"""A live kernelmap server for tests: uvicorn in a thread on a free 127.0.0.1 port, with an `openai`
client factory (no retries, so an error status reaches the test as it is)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["Live", "free_port", "start"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Live:
    """A running server: its base URL, state (engine, tokenizer) and uvicorn server."""

    url: str
    state: Any
    server: Any
    thread: threading.Thread

    def client(self, **kw: Any) -> Any:
        import openai

        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=60, **kw)

    def stop(self) -> None:
        """Shut the server down (its lifespan end closes the engine); fail if it does not end."""
        self.server.should_exit = True
        self.thread.join(timeout=30)
        if self.thread.is_alive():
            raise RuntimeError("the test server did not shut down within 30 s")


def start(state: Any) -> Live:
    import uvicorn

    from kernelmap.serve.app import create_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(state), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    return Live(f"http://127.0.0.1:{port}", state, server, thread)
