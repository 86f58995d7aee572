"""Serving benchmark: `kernelmap serve` against llama-cpp-python's OpenAI server, measured in the same run.

For each server in turn (ours, then the peer's `python -m llama_cpp.server`, both on 127.0.0.1 with the
same model, threads and context), and for each client count (1, 4, 8 by default), that many concurrent
clients each send `--requests` streaming /v1/completions requests one after another (distinct prompts,
greedy, `--max-tokens` tokens). Per setting it prints the aggregate generated tokens/s (all generated
tokens / wall time from the first request to the last answer), the time to first token p50/p95 and the
ratio ours / peer. One server runs at a time. The peer runs with --interrupt_requests false (by default
it cancels the running stream when a new request arrives); it serves one request at a time. The peer needs llama-cpp-python's server extra
(`pip install 'llama-cpp-python[server]'` in the peer venv, or pass --peer-python). Never used as a
test: numbers only, and only meaningful on an otherwise idle machine (the load average is printed).

    .venv/bin/python benchmarks/serve.py --clients 1,4,8 --requests 4 --max-tokens 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PEER_PY = ROOT / ".venv-peer" / "bin" / "python"

TOPICS = ["the history of bridges", "how rivers form", "a day at a lighthouse", "the first computers",
          "why the sky is blue", "a market in the morning", "learning to sail", "the life of bees",
          "mountain weather", "an old library", "trains across a continent", "the moon's phases"]


@dataclass
class Result:
    """One request: seconds to the first generated text, to the end, and tokens generated."""

    ttft: float
    total: float
    tokens: int
    counted_by: str  # "usage" (the server's count) or "chunks" (one streamed chunk per token)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prompt(client: int, i: int) -> str:
    topic = TOPICS[(client * 7 + i) % len(TOPICS)]
    return f"Request {client}.{i}. Write a short essay about {topic}. It begins:"


async def _one(http: httpx.AsyncClient, url: str, model: str, prompt: str, max_tokens: int) -> Result:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first = None
    chunks = 0
    used = None
    async with http.stream("POST", f"{url}/v1/completions", json=body) as r:
        if r.status_code != 200:
            raise SystemExit(f"error: {url}: status {r.status_code}: {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            if "error" in data:
                raise SystemExit(f"error: {url}: {data['error']}")
            if data.get("usage"):
                used = int(data["usage"]["completion_tokens"])
            for ch in data.get("choices") or []:
                if ch.get("text"):
                    chunks += 1
                    if first is None:
                        first = time.perf_counter()
    end = time.perf_counter()
    return Result((first or end) - t0, end - t0, used if used is not None else chunks,
                  "usage" if used is not None else "chunks")


async def _load(url: str, model: str, clients: int, requests: int, max_tokens: int) -> tuple[list[Result], float]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=httpx.Limits(max_connections=clients + 4)) as h:
        async def client(c: int) -> list[Result]:
            return [await _one(h, url, model, _prompt(c, i), max_tokens) for i in range(requests)]

        t0 = time.perf_counter()
        per = await asyncio.gather(*(client(c) for c in range(clients)))
        wall = time.perf_counter() - t0
    return [r for rs in per for r in rs], wall


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def _wait_healthy(proc: subprocess.Popen, url: str, path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"error: the server at {url} exited with status {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"error: the server at {url} was not ready within {timeout:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _serve(name: str, cmd: list[str], url: str, ready: str, model: str, levels: list[int], args) -> dict:
    print(f"starting {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE if args.quiet else None,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = {}
    try:
        _wait_healthy(proc, url, ready, args.startup_timeout)
        asyncio.run(_load(url, model, 1, 1, 4))  # warm-up (first-request allocations)
        for n in levels:
            results, wall = asyncio.run(_load(url, model, n, args.requests, args.max_tokens))
            tokens = sum(r.tokens for r in results)
            ttft = [r.ttft for r in results]
            out[n] = {"tok_s": tokens / wall, "tokens": tokens, "requests": len(results), "wall_s": wall,
                      "ttft_p50_s": _pct(ttft, 0.5), "ttft_p95_s": _pct(ttft, 0.95),
                      "counted_by": sorted({r.counted_by for r in results})}
            print(f"  {name} clients={n}: {out[n]['tok_s']:.1f} tok/s, TTFT p50 {out[n]['ttft_p50_s']:.3f} s "
                  f"p95 {out[n]['ttft_p95_s']:.3f} s", file=sys.stderr, flush=True)
    finally:
        _stop(proc)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None, help="GGUF file (default: the default model package)")
    ap.add_argument("--clients", default="1,4,8", help="comma list of concurrent streaming clients")
    ap.add_argument("--requests", type=int, default=4, help="requests per client (sent one after another)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512, help="context per sequence (ours) and of the peer's context")
    ap.add_argument("--peer-python", default=str(PEER_PY), help="python with llama-cpp-python[server]")
    ap.add_argument("--no-peer", action="store_true", help="only our server (no ratio)")
    ap.add_argument("--startup-timeout", type=float, default=900.0, help="seconds (ours compiles on first use)")
    ap.add_argument("--quiet", action="store_true", help="hide the servers' stderr")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from kernelmap.runtime import default_model_path

    gguf = str(Path(args.model) if args.model else default_model_path())
    levels = [int(c) for c in args.clients.split(",")]
    if not args.no_peer and not Path(args.peer_python).exists():
        raise SystemExit(f"error: --peer-python: {args.peer_python} is missing (run `make parity`, or pass --no-peer)")
    load_before = os.getloadavg()
    port = _free_port()
    ours = _serve("kernelmap", [sys.executable, "-m", "kernelmap", "serve", "-m", gguf, "--port", str(port),
                                "--parallel", str(max(levels)), "--ctx", str(args.ctx), "-t", str(args.threads),
                                "--queue", str(max(levels) * 2), "--alias", "kernelmap", "-q"],
                  f"http://127.0.0.1:{port}", "/health", "kernelmap", levels, args)
    peer = {}
    if not args.no_peer:
        port = _free_port()
        peer = _serve("llama_cpp.server", [args.peer_python, "-m", "llama_cpp.server", "--model", gguf,
                                           "--model_alias", "peer", "--host", "127.0.0.1", "--port", str(port),
                                           "--n_ctx", str(args.ctx), "--n_threads", str(args.threads),
                                           "--n_threads_batch", str(args.threads), "--verbose", "false",
                                           # its default cancels the running stream when another request comes
                                           "--interrupt_requests", "false"],
                      f"http://127.0.0.1:{port}", "/v1/models", "peer", levels, args)
    load_after = os.getloadavg()
    rows = []
    for n in levels:
        row = {"clients": n, "ours": ours[n], "peer": peer.get(n)}
        if peer:
            row["tok_s_ratio"] = ours[n]["tok_s"] / peer[n]["tok_s"] if peer[n]["tok_s"] else None
        rows.append(row)
    summary = {"model": gguf, "threads": args.threads, "ctx": args.ctx, "max_tokens": args.max_tokens,
               "requests_per_client": args.requests, "loadavg_before": load_before, "loadavg_after": load_after,
               "rows": rows}
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"model {Path(gguf).name}, threads {args.threads}, ctx {args.ctx}, {args.requests} requests/client x "
          f"{args.max_tokens} tokens; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(f"{'clients':>7} {'ours tok/s':>11} {'peer tok/s':>11} {'ratio':>6} {'ours TTFT p50/p95 s':>20} "
          f"{'peer TTFT p50/p95 s':>20}")
    for row in rows:
        o, p = row["ours"], row["peer"]
        ratio = f"{row['tok_s_ratio']:.2f}" if row.get("tok_s_ratio") else "-"
        ptok = f"{p['tok_s']:.1f}" if p else "-"
        pt = f"{p['ttft_p50_s']:.3f}/{p['ttft_p95_s']:.3f}" if p else "-"
        ot = f"{o['ttft_p50_s']:.3f}/{o['ttft_p95_s']:.3f}"
        print(f"{row['clients']:>7} {o['tok_s']:>11.1f} {ptok:>11} {ratio:>6} {ot:>20} {pt:>20}")


if __name__ == "__main__":
    main()
