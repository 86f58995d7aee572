"""Scale-out with Ray Serve (kernelmap.serve.ray_app): two local replicas of the tiny synthetic model behind one
endpoint, reached with the official `openai` client; both replicas serve (the x-kernelmap-replica header names
the one that answered), give the same tokens, and SIGTERM stops the whole deployment with in-flight requests
finished. Starting Ray plus two replicas takes ~40 s of both cores here, so that test is `slow`
(`make test-slow`, which installs the ray extra); the checks of the replica header, the CLI flags and the
builder's arguments need no Ray and run in `make test`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from live_server import free_port

from kernelmap.errors import ModelError
from kernelmap.serve.app import REPLICA_HEADER, _ReplicaHeader

PROMPTS = ["the cat sat", "a dog", "the mat is on the", "cat dog mat"]


def test_replica_header_middleware_names_the_replica_on_plain_and_streamed_responses():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def plain(request):
        return JSONResponse({"ok": 1})

    async def stream(request):
        async def parts():
            yield b"data: 1\n\n"
        return StreamingResponse(parts(), media_type="text/event-stream")

    app = _ReplicaHeader(Starlette(routes=[Route("/p", plain), Route("/s", stream)]), "r-7")

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return [await c.get("/p"), await c.get("/s"), await c.get("/missing")]

    for r in asyncio.run(go()):
        assert r.headers[REPLICA_HEADER] == "r-7", (r.url, r.headers)


def test_serve_cli_ray_flags_without_replicas_are_refused():
    r = subprocess.run([sys.executable, "-m", "kernelmap", "serve", "-m", "x.gguf", "--ray-address", "auto"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "--ray-address and --replica-cpus need --replicas" in r.stderr
    assert "Traceback" not in r.stderr


def test_ray_options_and_builder_refuse_bad_arguments():
    from kernelmap.serve.ray_app import RayOptions, build

    with pytest.raises(ModelError, match="replica count out of range"):
        RayOptions(0)
    with pytest.raises(ModelError, match="CPUs per replica"):
        RayOptions(2, num_cpus=-1)
    with pytest.raises(ModelError, match="no model given"):
        build({"replicas": "2"})
    with pytest.raises(ModelError, match="not an integer"):
        build({"model": "m.gguf", "replicas": "two"})


def _wait_ready(proc: subprocess.Popen, url: str, log, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"kernelmap serve --replicas exited with {proc.returncode} before it was ready:\n"
                        f"{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.kill()
    proc.wait()
    pytest.fail(f"kernelmap serve --replicas was not ready within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
def test_ray_two_replicas_behind_one_endpoint_both_serve_the_same_tokens(synth_gguf, tmp_path):
    pytest.importorskip("ray.serve", reason="the ray extra is not installed (pip install 'kernelmap[ray]')")
    import openai

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "kernelmap", "serve", "-m", str(synth_gguf), "--port", str(port), "--parallel", "2",
           "--ctx", "64", "-t", "1", "--batch", "8", "--replicas", "2", "--grace", "20", "-q"]
    log = tmp_path / "serve.log"  # a file, not a pipe: nobody reads a pipe while the test talks to the server
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    try:
        _wait_ready(proc, url, log, timeout=900)  # a cold build cache compiles the model first
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)

        def ask(prompt: str) -> tuple[str, str, int]:
            raw = client.completions.with_raw_response.create(model="synth", prompt=prompt, max_tokens=6,
                                                              temperature=0)
            out = raw.parse()
            return raw.headers[REPLICA_HEADER], out.choices[0].text, out.usage.completion_tokens

        # Rounds of 4 concurrent requests (2 replicas x 2 slots) until both replicas have answered. Ray's router
        # may keep sending to one replica while the other's queue-length probe is late (seen once under load:
        # 24 requests, one replica), so the test asks for up to 3 minutes before it says a replica never served.
        seen: dict[str, dict[str, str]] = {}  # replica -> prompt -> text
        asked = 0
        deadline = time.monotonic() + 180
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            while len(seen) < 2 and time.monotonic() < deadline:
                for prompt, (replica, text, n) in zip(PROMPTS, pool.map(ask, PROMPTS), strict=True):
                    assert n == 6
                    seen.setdefault(replica, {})[prompt] = text
                asked += len(PROMPTS)
                if len(seen) < 2 and asked >= 24:
                    time.sleep(1)
        assert len(seen) == 2, f"only replica(s) {sorted(seen)} answered {asked} requests in 3 minutes"
        # greedy decoding of one model: the replicas agree on every prompt both answered
        a, b = seen.values()
        common = set(a) & set(b)
        assert all(a[p] == b[p] for p in common), (a, b)
        health = httpx.get(f"{url}/health", timeout=10).json()
        assert health["replica"] in seen and health["slots"] == 2

        # streaming through the proxy, then SIGTERM while a stream is in flight: it finishes, the process exits 0
        stream = client.completions.create(model="synth", prompt="the cat", max_tokens=30, temperature=0,
                                           stream=True)
        first = next(iter(stream))
        assert first.choices[0].text is not None
        proc.send_signal(signal.SIGTERM)
        rest = list(stream)
        assert rest and rest[-1].choices[0].finish_reason == "length"
        proc.wait(timeout=120)
        out = log.read_text()
        assert proc.returncode == 0, out[-3000:]
        assert "kernelmap serve: stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
