"""Scale-out: N replicas of the same server behind one endpoint, on Ray Serve (`pip install 'kernelmap[ray]'`).

Each replica is a Ray actor that builds the very app `kernelmap serve` runs (server.build_state: compile
(cached), load, engine with its own KV slots; app.create_app: the same routes, errors and metrics) and
Ray Serve's HTTP proxy spreads requests over the replicas. A replica admits at most `parallel` requests
at once (its KV slots), so the proxy routes each request to a replica with a free slot; up to `queue` more
wait in Ray's router (more get Ray's 503). Every response names the replica that served it in the
`x-kernelmap-replica` header, and /health reports it too; /metrics is the serving replica's own.

Two ways in:
- `kernelmap serve -m MODEL --replicas N [--ray-address auto]`: starts (or joins) Ray, deploys, serves on
  --host/--port until SIGTERM/SIGINT, then shuts the deployment down (in-flight requests get --grace seconds).
- `serve run kernelmap.serve.ray_app:build model=/path/m.gguf replicas=4 parallel=8` on a Ray cluster
  (`ray start --head` on one node, `ray start --address=HEAD:6379` on each other): the same deployment from
  Ray's own CLI (or a `serve deploy` config naming this import path). The GGUF path must exist on every node
  that runs a replica; each node compiles into its own cache on first use.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelmap.errors import ModelError
from kernelmap.serve.app import REPLICA_HEADER
from kernelmap.serve.server import ServeOptions, model_id_for

__all__ = ["REPLICA_HEADER", "RayOptions", "build", "deployment", "replica_id", "run_ray"]


class RayOptions:
    """How many replicas and what each reserves from Ray: CPUs (default: its threads, else 1)."""

    def __init__(self, replicas: int = 2, *, address: str | None = None, num_cpus: float | None = None) -> None:
        if not 1 <= replicas <= 1024:
            raise ModelError("replica count out of range", pointer="--replicas", value=replicas, expected="1..1024")
        if num_cpus is not None and num_cpus < 0:
            raise ModelError("CPUs per replica must be >= 0", pointer="--replica-cpus", value=num_cpus)
        self.replicas = replicas
        self.address = address
        self.num_cpus = num_cpus


def _need_ray() -> Any:
    try:
        from ray import serve
    except ImportError:
        raise ModelError("Ray Serve is not installed", pointer="--replicas",
                         hint="pip install 'kernelmap[ray]'") from None
    return serve


def replica_id() -> str:
    """This replica's id in Ray Serve (the process id outside a replica)."""
    try:
        from ray import serve

        ctx = serve.get_replica_context()
    except Exception:  # noqa: BLE001 - not inside a replica (or no Ray): the pid still names the process
        return f"pid-{os.getpid()}"
    rid = getattr(ctx, "replica_id", None)
    tag = getattr(rid, "unique_id", None) or getattr(ctx, "replica_tag", None) or rid
    return str(tag) if tag else f"pid-{os.getpid()}"


def deployment(gguf: str | Path, options: ServeOptions, ray_options: RayOptions) -> Any:
    """The Ray Serve application (bound deployment): `ray_options.replicas` replicas of the server app."""
    serve = _need_ray()
    gguf = str(gguf)

    def build_app() -> Any:  # runs in each replica when it starts
        from kernelmap.serve.app import create_app
        from kernelmap.serve.server import build_state

        state = build_state(gguf, options)
        state.replica = replica_id()
        return create_app(state)

    class KernelmapReplica:
        """One server replica (the app is built by `build_app` in the replica's process)."""

    cpus = ray_options.num_cpus if ray_options.num_cpus is not None else float(options.threads or 1)
    dep = serve.deployment(
        serve.ingress(build_app)(KernelmapReplica), name="kernelmap", num_replicas=ray_options.replicas,
        ray_actor_options={"num_cpus": cpus}, max_ongoing_requests=options.parallel,
        max_queued_requests=options.queue if options.queue > 0 else -1,
        graceful_shutdown_timeout_s=options.grace, graceful_shutdown_wait_loop_s=0.5)
    return dep.bind()


def _int(args: dict[str, Any], key: str, default: int) -> int:
    try:
        return int(args.get(key, default))
    except (TypeError, ValueError):
        raise ModelError("not an integer", pointer=key, value=args.get(key)) from None


def build(args: dict[str, Any]) -> Any:
    """Ray Serve application builder (`serve run kernelmap.serve.ray_app:build model=... replicas=N`):
    keys model (required), replicas, parallel, ctx, threads, queue, alias, batch, policy, grace."""
    from kernelmap.compiler import CompileOptions
    from kernelmap.serve.server import SERVE_PREFILL_ROWS

    if "model" not in args:
        raise ModelError("no model given", pointer="model", hint="serve run kernelmap.serve.ray_app:build model=PATH")
    threads = _int(args, "threads", 0) or None
    options = ServeOptions(parallel=_int(args, "parallel", 4), ctx=_int(args, "ctx", 2048), threads=threads,
                           queue=_int(args, "queue", 64), grace=float(args.get("grace", 30.0)),
                           compile=CompileOptions(policy=str(args.get("policy", "llama-cpu")),
                                                  max_rows=_int(args, "batch", SERVE_PREFILL_ROWS)),
                           model_id=args.get("alias") or model_id_for(args["model"]))
    return deployment(args["model"], options, RayOptions(_int(args, "replicas", 2)))


def run_ray(gguf: str | Path, options: ServeOptions, ray_options: RayOptions, *, host: str, port: int,
            progress: Callable[[str], None] | None = None, compiled: Callable[[], None] | None = None) -> None:
    """Start (or join) Ray, deploy the replicas on host:port, serve until SIGTERM/SIGINT, shut down.
    `progress` gets compile steps; `compiled` is called once the model is compiled."""
    serve = _need_ray()
    import ray

    from kernelmap.compiler import compile_model
    from kernelmap.serve.server import check_options, compile_options

    check_options(options)
    # compile here first: the replicas on this node then load the cached build instead of each compiling it
    compile_model(gguf, compile_options(options), progress=progress)
    if compiled is not None:
        compiled()
    print("kernelmap serve: starting Ray Serve", file=sys.stderr, flush=True)
    if ray_options.address:
        ray.init(address=ray_options.address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(include_dashboard=False, log_to_driver=False, num_cpus=os.cpu_count() or 1)
    stop = threading.Event()  # handlers set after ray.init, which installs its own (an abort on SIGTERM); a
    for sig in (signal.SIGTERM, signal.SIGINT):  # signal while the replicas start ends the wait below at once
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(deployment(gguf, options, ray_options), name="kernelmap", route_prefix="/")
        model_id = options.model_id or model_id_for(gguf)
        print(f"kernelmap serve: {model_id} on http://{host}:{port}/v1 ({ray_options.replicas} Ray Serve replicas x "
              f"{options.parallel} parallel, ctx {options.ctx or 'default'})", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
        print("kernelmap serve: stopping the replicas", file=sys.stderr, flush=True)
        serve.shutdown()
    finally:
        ray.shutdown()
    print("kernelmap serve: stopped", file=sys.stderr, flush=True)

