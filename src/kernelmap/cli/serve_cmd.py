"""`kernelmap serve`: compile a model with a batch phase and serve it over OpenAI's HTTP API.

Parses the flags, checks that the `serve` extra is installed (naming the pip command when it is not),
and hands over to kernelmap.serve. It holds no serving logic itself.
"""

from __future__ import annotations

import importlib.util
import socket

import click

from kernelmap.cli.run_cmd import _apply, _cache_opts, _threads_opt
from kernelmap.cli.text_input import arg_text
from kernelmap.errors import ModelError
from kernelmap.serve.server import MAX_GRACE, SERVE_CTX, SERVE_PREFILL_ROWS

__all__ = ["register"]

_NEEDS = ("starlette", "uvicorn", "prometheus_client")


def _grace(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not 0 <= value <= MAX_GRACE:  # false for nan too
        raise click.BadParameter(f"{value} is not in the range 0..{MAX_GRACE:g} (seconds)", ctx, param)
    return value


def _check_host(host: str, port: int) -> None:
    """Refuse an address to listen on that does not resolve, or a port someone already listens on (before the
    model is compiled: uvicorn would find out only after the compile). A port taken between this check and the
    server's start still fails there, as before."""
    try:
        addrs = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else "not a valid host name"
        raise ModelError(f"cannot listen on this address: {reason}", pointer="--host", value=host,
                         expected="an IP address or a resolvable host name", hint="--host 127.0.0.1 or 0.0.0.0") from None
    family, kind, proto, _, sockaddr = addrs[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            probe.bind(sockaddr)
        except OSError as exc:
            raise ModelError(f"cannot listen on this port: {exc.strerror}", pointer="--port", value=port,
                             hint="another server is using it: pick another --port") from None


@click.command("serve", epilog="Example: kernelmap serve -m model.gguf --port 8080 --parallel 8 "
               "(add --replicas 4 for four replicas behind this port with Ray Serve; -ctk q8_0 -ctv q8_0 for "
               "a q8_0 KV cache)")
@click.option("-m", "--model", type=click.Path(dir_okay=False), default=None,
              help="GGUF model file (default: the default model package).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--parallel", type=int, default=4, show_default=True,
              help="Sequences decoded together (KV slots; one batched decode step advances all).")
@click.option("-c", "--ctx", "--ctx-size", "ctx", type=click.IntRange(min=1), default=None,
              help=f"KV capacity per sequence (default: {SERVE_CTX}, or the model's trained context when shorter).")
@_threads_opt
@click.option("--queue", type=int, default=64, show_default=True,
              help="Requests that may wait for a slot; more get 503.")
@click.option("--grace", type=float, default=30.0, show_default=True, callback=_grace,
              help=f"Seconds active requests may run after SIGTERM (0..{MAX_GRACE:g}).")
@click.option("--alias", default=None, help="Model id clients use (default: the GGUF file name).")
@click.option("--policy", default=None, help="Numerics policy name or file (default: llama-cpu, or the one "
              "-ctk/-ctv pick).")
@_apply(_cache_opts)
@click.option("-ub", "--ubatch-size", "--batch", "batch", type=int, default=SERVE_PREFILL_ROWS, show_default=True,
              help="Prefill rows per step (fewer than run's: each KV slot's ring holds window + rows - 1 cells).")
@click.option("--replicas", type=int, default=None,
              help="Run N replicas behind this endpoint with Ray Serve (needs kernelmap[ray]).")
@click.option("--ray-address", default=None,
              help="With --replicas: join this Ray cluster ('auto': the local node's) instead of starting one.")
@click.option("--replica-cpus", type=float, default=None,
              help="With --replicas: CPUs each replica reserves in Ray (default: --threads, else 1).")
@click.option("-q", "--quiet", is_flag=True, help="No compile progress on stderr.")
def serve_command(model: str | None, host: str, port: int, parallel: int, ctx: int | None, threads: int | None, queue: int,
                  grace: float, alias: str | None, policy: str | None, cache_k: str | None, cache_v: str | None,
                  batch: int, replicas: int | None, ray_address: str | None, replica_cpus: float | None,
                  quiet: bool) -> None:
    """Serve a model with an OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models,
    /health, /metrics), decoding concurrent requests in one batch."""
    missing = [m for m in _NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelError("the server's dependencies are not installed", value=", ".join(missing),
                         hint="pip install 'kernelmap[serve]'")
    if replicas is None and (ray_address or replica_cpus is not None):
        raise ModelError("--ray-address and --replica-cpus need --replicas", pointer="--replicas",
                         hint="kernelmap serve --replicas 2 --ray-address auto")
    if replicas is not None and importlib.util.find_spec("ray") is None:
        raise ModelError("Ray Serve is not installed", pointer="--replicas", hint="pip install 'kernelmap[ray]'")
    if not 1 <= port <= 65535:
        raise ModelError("port out of range", pointer="--port", value=port, expected="1..65535")
    host = arg_text(host, "--host", "address")
    alias = arg_text(alias, "--alias", "model id")
    _check_host(host, port)
    from kernelmap.cli.run_cmd import _options, _Progress, cache_policy
    from kernelmap.runtime import default_model_path
    from kernelmap.serve import ServeOptions, build_state, run

    path = model or str(default_model_path())
    options = ServeOptions(parallel=parallel, ctx=ctx, threads=threads, queue=queue, grace=grace,
                           compile=_options(cache_policy(policy, cache_k, cache_v), (), None, batch), model_id=alias)
    progress = _Progress(quiet)
    if replicas is not None:
        from kernelmap.serve.ray_app import RayOptions, run_ray

        ray_options = RayOptions(replicas, address=ray_address, num_cpus=replica_cpus)
        stopped = []

        def compiled() -> None:
            stopped.append(True)
            progress.stop()

        try:
            run_ray(path, options, ray_options, host=host, port=port, progress=progress.say, compiled=compiled)
        finally:
            if not stopped:
                progress.stop()
        return
    try:
        state = build_state(path, options, progress=progress.say)
    finally:
        progress.stop()
    run(state, host=host, port=port, grace=grace)


def register(cli: click.Group) -> None:
    """Add `serve` to the CLI."""
    cli.add_command(serve_command)
