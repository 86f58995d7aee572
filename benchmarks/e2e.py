"""End-to-end benchmark: our prefill and decode tokens/s against llama.cpp's, measured in the same run.

For each thread count, alternates our run and the peer's run `--repeats` times on the same prompt
token ids (a 256-token prompt, 128 greedy decode steps by default) and prints the medians and the
ratios (ours / llama.cpp) as a table and, with --json, one JSON object. It also measures the machine's
streaming-read bandwidth for each thread count in the same run (kernelmap bench's probe) and prints
the bytes one decode step reads (see `decode_bytes`) and the fraction of that bandwidth our decode
reaches: bytes/token x tokens/s / bandwidth. The peer runs in the peer venv
(`make peer` builds it) through benchmarks/peer_llama.py, in a subprocess: a peer that crashes (a llama.cpp
built for AMX segfaults on batches of 2+ rows on some CPUs) is reported as "peer crashed: signal N" with
exit 1, checked once with a short batch before anything is timed. Never used as a test: numbers only.

On a VM, N vCPUs are not always N cores: on the 2-vCPU development machine the 2-thread int8 peak is
sometimes no higher than the 1-thread one (as when the host runs both vCPUs on one core's two
hyperthreads), and a compute-bound kernel then gains nothing from the second thread. Next to every timed
run with more than one thread, the benchmark measures that compute scaling (the N-thread int8
multiply-add peak over N times the 1-thread one, kernelmap bench's probe): ~1.0 when the threads had
cores of their own, ~1/N when they shared one. Every probe is printed (the JSON also has their median),
so a ratio can be read together with the machine state it was measured in. With `--min-scaling 0.8` a pair (our
run and the peer's) is timed again when a probe before, between or after it reads below 0.8: both sides are then
measured with a core per thread, and the discarded pairs' probes are printed (the same rule for both: a pair is
kept or dropped whole). The read bandwidth is the
median of five measurements taken after the runs, each the fastest of its passes (a ceiling); the fraction is
also printed against the median of their median passes (what a typical pass reads: on a shared VM the fastest
pass can be a quarter above it). Because that bandwidth moves within minutes there (45-83 GB/s on 2 threads in
one session), each of our timed runs is also bracketed by two short reads of a 256 MiB buffer, right before and right
after it: the fraction is printed a third time against the mean of their median passes (the machine while our decode
ran; the median over the kept runs of each run's own fraction).

    .venv/bin/python benchmarks/e2e.py --threads 1,2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADJACENT_PROBE_BYTES = 256 << 20  # the reads bracketing each of our runs (median pass of each)
ADJACENT_PROBE_TIME = 0.15        # seconds of passes per prefetch hint and read
PEER_PY = ROOT / ".venv-peer" / "bin" / "python"

TEXT = ("The history of computing is a story of abstractions built one atop another. Early machines were "
        "programmed by rewiring panels; later, stored programs let the same hardware run many tasks. "
        "Assemblers named instructions, compilers translated structured languages, and operating systems "
        "shared processors among users. Each layer hid details below it while exposing new power above. ")


def _ours(model, prompt: list[int], n_decode: int) -> dict:
    model.reset()
    t0 = time.perf_counter()
    logits = model.prefill(prompt)
    t1 = time.perf_counter()
    toks = []
    for _ in range(n_decode):
        tok = int(logits.argmax())
        toks.append(tok)
        logits = model.decode(tok)
    t2 = time.perf_counter()
    return {"prefill_tps": len(prompt) / (t1 - t0), "decode_tps": n_decode / (t2 - t1), "tokens": toks}


def decode_bytes(gguf: str, positions: range) -> dict:
    """Bytes one decode step reads, averaged over `positions` (the positions the timed steps run at).

    Weights: every weight port of every op of the decode graph (the circuit hydrated for one row),
    a tensor read by two ops counted twice; an op indexed by token ids (an i32 input: the embedding
    lookup) reads one row. KV: an op with state ports and an output (attention) reads each state
    buffer over the positions it sees, min(pos + 1, window) rows (window 0: all), per kv head.
    Activations are not counted (they stay in cache)."""
    from kernelmap.circuits.hydrate import hydrate, read_config, row_bytes
    from kernelmap.circuits.loader import circuit_for, load_interfaces
    from kernelmap.compiler import CompileOptions
    from kernelmap.gguf import open_gguf
    from kernelmap.numerics.policy import load_policy

    g = open_gguf(gguf)
    circuit = circuit_for(g.metadata["general.architecture"])
    interfaces = load_interfaces()
    config = read_config(circuit, g.metadata, g.tensors, source=gguf)
    kv = load_policy(CompileOptions().policy).rule_for("attention").kv or "f32"
    graph = hydrate(circuit, config, g.tensors, interfaces, phase="decode", max_rows=1, kv_dtype=kv, source=gguf)
    weights = 0
    kv_total = 0
    for op in graph.ops:
        gathered = any(graph.tensors[t].dtype == "i32" for t in op.inputs.values())
        for ref in op.weights.values():
            rows = ref.shape[0] if len(ref.shape) > 1 else 1
            weights += (1 if gathered else rows) * row_bytes(ref.dtype, ref.shape[-1])
        if not op.state or not op.outputs:
            continue
        window = int(op.params.get("window", 0) or 0)
        for sname in op.state.values():
            s = graph.state[sname]
            per_row = row_bytes(s.dtype, int(s.shape[2])) * int(s.shape[0])
            kv_total += sum(per_row * (min(p + 1, window) if window > 0 else p + 1) for p in positions)
    kv_mean = kv_total / max(len(positions), 1)
    return {"weights": weights, "kv": round(kv_mean), "total": round(weights + kv_mean)}


class PeerError(Exception):
    """The peer run failed or crashed; the message is one line."""


def _peer(gguf: str, prompt: list[int], n_decode: int, threads: int, flash_attn: bool,
          peer_py: Path = PEER_PY, ubatch: int | None = None) -> dict:
    """One peer run; `ubatch` splits the prompt into llama_decode micro-batches of that many tokens (default: one)."""
    req = {"model": gguf, "tokens": prompt, "n_decode": n_decode, "threads": threads,
           "n_ctx": len(prompt) + n_decode + 16, "flash_attn": flash_attn, "repeats": 1}
    if ubatch is not None:
        req["n_ubatch"] = ubatch
    proc = subprocess.run([str(peer_py), "-P", str(ROOT / "benchmarks" / "peer_llama.py")], input=json.dumps(req),
                          capture_output=True, text=True, check=False)
    where = f"llama.cpp ({peer_py}, {threads} thread{'s' if threads != 1 else ''}, {len(prompt)}-token batch)"
    if proc.returncode < 0:
        sig = -proc.returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "unknown signal"
        raise PeerError(f"peer crashed: signal {sig} ({name}) in {where}")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise PeerError(f"peer failed (exit {proc.returncode}) in {where}: {last[:300]}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])[0]
    except (IndexError, json.JSONDecodeError, KeyError):
        raise PeerError(f"peer printed no result in {where}: {proc.stdout.strip()[-200:]!r}") from None


def _fail(message: str, hint: str) -> None:
    print(f"error: {message}\nhint: {hint}", file=sys.stderr)
    raise SystemExit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None, help="GGUF file (default: the default model package)")
    ap.add_argument("--threads", default="2", help="comma list, e.g. 1,2")
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--flash-attn", action="store_true", help="run the peer with flash attention")
    ap.add_argument("--fusion-compare", action="store_true",
                    help="also time our program built without fusion rules, in the same run, and print the ratio")
    ap.add_argument("--policy", default=None, help="numerics policy to compile ours with (default: the compiler's)")
    ap.add_argument("--peer-python", type=Path, default=PEER_PY,
                    help="Python of the peer venv (default: .venv-peer/bin/python, built by `make peer`)")
    ap.add_argument("--min-scaling", type=float, default=0.0, metavar="X",
                    help="with 2+ threads, time a pair (our run, the peer's) again when a compute-scaling probe before, "
                         "between or after it reads below X (e.g. 0.8: the host ran the threads on a shared core); "
                         f"discarded pairs are printed; at most {MAX_ATTEMPTS_PER_REPEAT} attempts per repeat (default 0: keep "
                         "every pair)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.peer_python.exists():
        _fail(f"{args.peer_python}: peer Python not found", "run `make peer` (builds llama-cpp-python) first")
    from kernelmap.gguf import open_gguf
    from kernelmap.runtime import default_model_path
    from kernelmap.tokenizer import Tokenizer

    gguf = str(Path(args.model) if args.model else default_model_path())
    probe = Tokenizer.from_metadata(open_gguf(gguf).metadata).encode(TEXT)[:16]
    try:  # a short batch first: a broken peer build fails here, before anything is compiled or timed
        _peer(gguf, probe, 1, max(int(t) for t in args.threads.split(",")), args.flash_attn, args.peer_python)
    except PeerError as exc:
        _fail(str(exc), "a llama.cpp built with native flags on a CPU with AMX crashes on batches of 2+ rows; "
              "`make peer` builds it with explicit ISA flags and no AMX")
    try:
        results = _measure(args, gguf)
    except PeerError as exc:
        _fail(str(exc), "the peer ran the probe batch but failed while timing; run it alone to see its output")
    _print(args, results)


MAX_ATTEMPTS_PER_REPEAT = 3  # --min-scaling: pairs timed per kept repeat at most (then the rest are kept as they come)


def _scaling(threads: int) -> float | None:
    """The N-thread int8 peak / (N x the 1-thread peak), from a short probe; None without an x86 probe."""
    from kernelmap.bench.runner import INT8_PEAK_KINDS, measure_int8_peak

    got = measure_int8_peak([k[2] for k in INT8_PEAK_KINDS], threads=(1, threads), min_time=0.05)
    for kind in INT8_PEAK_KINDS:
        one, many = got.get((kind[2], 1)), got.get((kind[2], threads))
        if one and many:
            return many / (threads * one)
    return None


def _measure(args: argparse.Namespace, gguf: str) -> list[dict]:
    from kernelmap.bench import measure_bandwidth
    from kernelmap.bench.runner import StreamProbe
    from kernelmap.compiler import CompileOptions
    from kernelmap.runtime import load

    results = []
    # decode steps run at positions prompt .. prompt + decode - 1 (the first decode token comes from prefill)
    step = decode_bytes(gguf, range(args.prompt_tokens, args.prompt_tokens + args.decode_tokens))
    adjacent_probe = StreamProbe(ADJACENT_PROBE_BYTES)
    for threads in [int(t) for t in args.threads.split(",")]:
        base = CompileOptions() if args.policy is None else CompileOptions(policy=args.policy)
        model = load(gguf, threads=threads, n_ctx=args.prompt_tokens + args.decode_tokens + 16, options=base)
        ids = model.tokenizer.encode(TEXT * 20)[: args.prompt_tokens]
        unfused = None
        if args.fusion_compare:
            unfused = load(gguf, threads=threads, n_ctx=args.prompt_tokens + args.decode_tokens + 16,
                           options=replace(base, fusion=False))
        ours, peer, plain = [], [], []
        scale_ours, scale_peer = [], []
        discarded: list[list[float | None]] = []
        same = True
        attempts = 0
        while len(ours) < args.repeats:
            attempts += 1
            s_ours = _scaling(threads) if threads > 1 else None
            bw_before = adjacent_probe.read(threads, ADJACENT_PROBE_TIME)[1]
            o = _ours(model, ids, args.decode_tokens)
            o["adjacent_gbps"] = (bw_before + adjacent_probe.read(threads, ADJACENT_PROBE_TIME)[1]) / 2
            s_peer = _scaling(threads) if threads > 1 else None
            p = _peer(gguf, ids, args.decode_tokens, threads, args.flash_attn, args.peer_python)
            same &= o["tokens"] == p["tokens"]
            if threads > 1 and args.min_scaling > 0:  # both runs bracketed: before ours, between, after the peer
                probes = [s_ours, s_peer, _scaling(threads)]
                low = [v for v in probes if v is not None and v < args.min_scaling]
                if low and attempts < args.repeats * MAX_ATTEMPTS_PER_REPEAT:
                    discarded.append([None if v is None else round(v, 2) for v in probes])
                    continue
            if threads > 1:
                scale_ours.append(s_ours)
                scale_peer.append(s_peer)
            if unfused is not None:
                plain.append(_ours(unfused, ids, args.decode_tokens))
            ours.append(o)
            peer.append(p)
        model.close()
        row = {"threads": threads}
        if unfused is not None:
            unfused.close()
            for key in ("prefill_tps", "decode_tps"):
                a = statistics.median(r[key] for r in ours)
                b = statistics.median(r[key] for r in plain)
                row[f"unfused_{key}"] = round(b, 2)
                row[f"fusion_ratio_{key.split('_')[0]}"] = round(a / b, 3) if b else None
        for key in ("prefill_tps", "decode_tps"):
            a = statistics.median(r[key] for r in ours)
            b = statistics.median(r[key] for r in peer)
            row[f"ours_{key}"] = round(a, 2)
            row[f"llama_{key}"] = round(b, 2)
            row[f"ratio_{key.split('_')[0]}"] = round(a / b, 3) if b else None
        typical: dict[int, list[float]] = {}
        bw = measure_bandwidth((threads,), repeats=5, typical=typical)[threads]  # after the runs: no model threads
        bw_typ = statistics.median(typical[threads])
        for key, got in (("compute_scaling_ours", scale_ours), ("compute_scaling_peer", scale_peer)):
            vals = [v for v in got if v is not None]
            if vals:
                row[key] = round(statistics.median(vals), 2)
                row[key + "_all"] = [round(v, 2) for v in vals]
        row["decode_bytes_per_token"] = step["total"]
        row["decode_weight_bytes"] = step["weights"]
        row["decode_kv_bytes"] = step["kv"]
        row["read_bandwidth_gbps"] = round(bw, 2)
        row["decode_bandwidth_fraction"] = round(step["total"] * row["ours_decode_tps"] / (bw * 1e9), 3)
        row["read_bandwidth_typical_gbps"] = round(bw_typ, 2)
        row["decode_bandwidth_fraction_typical"] = round(step["total"] * row["ours_decode_tps"] / (bw_typ * 1e9), 3)
        row["read_bandwidth_adjacent_gbps"] = round(statistics.median(r["adjacent_gbps"] for r in ours), 2)
        row["decode_bandwidth_fraction_adjacent"] = round(
            statistics.median(step["total"] * r["decode_tps"] / (r["adjacent_gbps"] * 1e9) for r in ours), 3)
        row["greedy_tokens_identical"] = same
        if args.min_scaling > 0 and threads > 1:
            row["min_scaling"] = args.min_scaling
            row["discarded_pairs_scaling"] = discarded
        row["peer_version"] = peer[0]["version"]
        row["peer_system_info"] = peer[0].get("system_info")
        results.append(row)
    return results


def _print(args: argparse.Namespace, results: list[dict]) -> None:
    from kernelmap.compiler import CompileOptions

    out = {"prompt_tokens": args.prompt_tokens, "decode_tokens": args.decode_tokens, "repeats": args.repeats,
           "policy": args.policy or CompileOptions().policy, "peer_flash_attn": args.flash_attn, "results": results}
    if args.json:
        print(json.dumps(out))
        return
    print(f"{'threads':>7} {'prefill ours':>13} {'llama.cpp':>10} {'ratio':>6} | {'decode ours':>12} "
          f"{'llama.cpp':>10} {'ratio':>6} | same tokens")
    for r in results:
        print(f"{r['threads']:>7} {r['ours_prefill_tps']:>13.1f} {r['llama_prefill_tps']:>10.1f} "
              f"{r['ratio_prefill']:>6.2f} | {r['ours_decode_tps']:>12.1f} {r['llama_decode_tps']:>10.1f} "
              f"{r['ratio_decode']:>6.2f} | {r['greedy_tokens_identical']}")
    for r in results:
        print(f"decode (threads {r['threads']}): {r['decode_bytes_per_token'] / 1e6:.1f} MB/token "
              f"(weights {r['decode_weight_bytes'] / 1e6:.1f}, KV {r['decode_kv_bytes'] / 1e6:.2f}) x "
              f"{r['ours_decode_tps']:.1f} tok/s = {r['decode_bytes_per_token'] * r['ours_decode_tps'] / 1e9:.2f} GB/s"
              f" of {r['read_bandwidth_gbps']:.2f} GB/s read bandwidth: {100 * r['decode_bandwidth_fraction']:.0f}%"
              f" (of its median pass, {r['read_bandwidth_typical_gbps']:.2f} GB/s: "
              f"{100 * r['decode_bandwidth_fraction_typical']:.0f}%; of the reads right before and after our runs, "
              f"{r['read_bandwidth_adjacent_gbps']:.2f} GB/s: {100 * r['decode_bandwidth_fraction_adjacent']:.0f}%)")
    for r in results:
        if "compute_scaling_ours" in r:
            print(f"compute scaling at {r['threads']} threads (1.0: a core per thread), next to each run: ours "
                  f"{r['compute_scaling_ours_all']}, llama.cpp {r['compute_scaling_peer_all']}")
    for r in results:
        if "discarded_pairs_scaling" in r:
            print(f"--min-scaling {r['min_scaling']} (threads {r['threads']}): {len(r['discarded_pairs_scaling'])} "
                  f"pair(s) timed again, their probes (before ours, between, after the peer's): "
                  f"{r['discarded_pairs_scaling']}")
    for r in results:
        if "fusion_ratio_decode" in r:
            print(f"fusion on/off (threads {r['threads']}): prefill {r['fusion_ratio_prefill']:.2f}x, "
                  f"decode {r['fusion_ratio_decode']:.2f}x")
    print(json.dumps(out), file=sys.stderr)


if __name__ == "__main__":
    main()
