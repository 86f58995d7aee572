"""Long-context benchmark: memory and speed of `kernelmap run --ctx N` against llama.cpp's, in the same run.

For each context length N (default 2048 and 8192) it builds one prompt of N - decode - 8 token ids (the text
below repeated, our tokenizer), then, alternating sides:
  ours:  `kernelmap run --ctx N -f prompt -n decode --json` in a subprocess (the model compiled beforehand,
         so no compiler runs inside the measured process);
  peer:  llama.cpp (llama-cpp-python in the peer venv) in a subprocess: n_ctx N, flash attention on,
         n_batch = n_ubatch = 512 (llama.cpp's defaults), f16 K/V (--cache-type q8_0: q8_0 K/V on both
         sides), the same token ids; swa_full on (its
         default in llama-cpp-python: SWA layers keep every cell, the layout our parity tests compare with)
         and, with --peer-small-swa, also swa_full off (the SWA cache sized window + ubatch, padded to 256).
Printed per side: peak RSS (the child's own VmHWM, polled: _run_measured says why not ru_maxrss), the
KV bytes it allocates (ours: the build's state buffers at this context, ring or full length per layer, as
km_model_create allocates them; llama.cpp: its own "KV buffer size" log lines), prefill and decode tokens/s
and the ratio ours / llama.cpp, whether the greedy tokens agree. Then, from a profiling build of ours
(`--profile`, the per-op timers), attention's share of prefill and decode time at each context.
The machine may be shared: speed figures are relative (both sides in one run), memory is absolute.
Never used as a test: numbers only.

    .venv/bin/python benchmarks/longctx.py --ctx 2048,8192 --threads 2 --decode-tokens 64
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER_PY = ROOT / ".venv-peer" / "bin" / "python"
OURS_PY = Path(sys.executable)

TEXT = ("The history of computing is a story of abstractions built one atop another. Early machines were "
        "programmed by rewiring panels; later, stored programs let the same hardware run many tasks. "
        "Assemblers named instructions, compilers translated structured languages, and operating systems "
        "shared processors among users. Each layer hid details below it while exposing new power above. "
        "Numbers in a table, 17, 42, 1999 and 3.14159, mean different things to different readers. ")


def _vm_hwm(pid: int) -> int | None:
    """The peak RSS in bytes of process `pid`'s current address space (VmHWM), None when unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _run_measured(cmd: list[str], stdin: str | None = None) -> tuple[int, str, str, int]:
    """Run `cmd`; return (exit code, stdout, stderr, peak RSS in bytes of that process).

    The peak is the child's VmHWM, read every 20 ms until it exits (it only grows, so the last reading is the
    peak up to those last 20 ms), not wait4's ru_maxrss: Linux carries the RSS of the image a process replaced by
    exec into its ru_maxrss, i.e. this script's own RSS at the fork, so once the profiling build below had grown
    this process to ~700 MiB every later child reported that (ctx 8192: ours and llama.cpp's "peaks" both
    732958720 bytes). ru_maxrss only when no reading was possible (a child that exited within 20 ms)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err)
        if stdin is not None:
            proc.stdin.write(stdin.encode())
        proc.stdin.close()
        peak = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            hwm = _vm_hwm(proc.pid)
            if hwm is not None:
                peak = hwm if peak is None else max(peak, hwm)
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), \
            peak if peak is not None else usage.ru_maxrss * 1024


def _ours(gguf: str, prompt_file: Path, n_ctx: int, n_decode: int, threads: int, cache_type: str = "f16") -> dict:
    cmd = [str(OURS_PY), "-m", "kernelmap", "run", "-m", gguf, "--ctx", str(n_ctx), "-f", str(prompt_file),
           "-n", str(n_decode), "-t", str(threads), "-ctk", cache_type, "-ctv", cache_type, "--json", "-q"]
    rc, out, err, rss = _run_measured(cmd)
    if rc != 0:
        raise SystemExit(f"error: kernelmap run --ctx {n_ctx} failed (exit {rc}): {err.strip()[-300:]}")
    r = json.loads(out.strip().splitlines()[-1])
    return {"rss": rss, "prefill_tps": r["prefill_tokens_per_s"], "decode_tps": r["decode_tokens_per_s"],
            "prompt_tokens": r["prompt_tokens"], "tokens": r["tokens"]}


def _peer(peer_py: Path, gguf: str, ids: list[int], n_ctx: int, n_decode: int, threads: int, swa_full: bool,
          cache_type: str = "f16") -> dict:
    req = {"model": gguf, "tokens": ids, "n_ctx": n_ctx, "n_decode": n_decode, "threads": threads,
           "swa_full": swa_full, "cache_type": cache_type}
    rc, out, err, rss = _run_measured([str(peer_py), "-P", str(Path(__file__).resolve()), "--peer-worker"],
                                      json.dumps(req))
    if rc != 0:
        raise SystemExit(f"error: llama.cpp run (n_ctx {n_ctx}) failed (exit {rc}): {err.strip()[-300:]}")
    r = json.loads(out.strip().splitlines()[-1])
    # llama.cpp's own allocation lines, e.g. "llama_kv_cache:        CPU KV buffer size =    18.00 MiB"
    kv = sum(float(x) for x in re.findall(r"KV buffer size\s*=\s*([0-9.]+) MiB", err)) * 2**20
    compute = sum(float(x) for x in re.findall(r"compute buffer size\s*=\s*([0-9.]+) MiB", err)) * 2**20
    r.update(rss=rss, kv_bytes=int(kv), compute_bytes=int(compute))
    return r


def _peer_worker() -> None:
    """Inside the peer venv: one llama.cpp prefill + greedy decode, timings from its own counters."""
    import llama_cpp
    import numpy as np

    req = json.loads(sys.stdin.read())
    cache = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0}[req.get("cache_type", "f16")]
    llm = llama_cpp.Llama(model_path=req["model"], n_ctx=req["n_ctx"], n_threads=req["threads"],
                          n_threads_batch=req["threads"], n_batch=512, n_ubatch=512, flash_attn=True,
                          type_k=cache, type_v=cache,
                          swa_full=req["swa_full"], verbose=True, logits_all=False, seed=0)
    llama_cpp.llama_perf_context_reset(llm.ctx)
    llm.eval(req["tokens"])
    toks = []
    for i in range(req["n_decode"]):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        toks.append(int(np.argmax(logits)))
        if i < req["n_decode"] - 1:
            llm.eval([toks[-1]])
    perf = llama_cpp.llama_perf_context(llm.ctx)
    print(json.dumps({"prefill_tps": 1e3 * perf.n_p_eval / perf.t_p_eval_ms if perf.t_p_eval_ms else 0.0,
                      "decode_tps": 1e3 * perf.n_eval / perf.t_eval_ms if perf.t_eval_ms else 0.0,
                      "tokens": toks, "version": llama_cpp.__version__}))


def _kv_bytes_ours(model) -> int:
    """The state bytes km_model_create allocated for this context (per buffer, ring or full length)."""
    return int(model.kv_bytes)


def _attention_share(gguf: str, ids: list[int], n_ctx: int, n_decode: int, threads: int, policy: str) -> dict:
    """Attention's share of prefill and decode time from a profiling build's per-op timers."""
    from dataclasses import replace

    from kernelmap.compiler import CompileOptions
    from kernelmap.runtime import load

    model = load(gguf, threads=threads, n_ctx=n_ctx, options=replace(CompileOptions(policy=policy), profile=True))
    with model:
        kinds = {(ph, label): prov for ph, label, prov, *_ in model.info["selection"]}
        model.reset()
        t0 = time.perf_counter()
        logits = model.prefill(ids)
        t1 = time.perf_counter()
        for _ in range(n_decode):
            logits = model.decode(int(logits.argmax()))
        t2 = time.perf_counter()
        out = {"prefill_wall": t1 - t0, "decode_wall": t2 - t1}
        for phase in ("prefill", "decode"):
            ops = model.profile(phase)
            total = sum(s for _, s in ops)
            attn = sum(s for label, s in ops if kinds.get((phase, label), "").startswith("attention"))
            out[f"{phase}_attention_share"] = attn / total if total else 0.0
    return out


def main() -> None:
    if "--peer-worker" in sys.argv:
        _peer_worker()
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None, help="GGUF file (default: the default model package)")
    ap.add_argument("--ctx", default="2048,8192", help="comma list of context lengths")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--peer-small-swa", action="store_true",
                    help="also run llama.cpp with swa_full off (SWA cache of window + ubatch cells)")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-op profile (attention's share)")
    ap.add_argument("--peer-python", type=Path, default=PEER_PY)
    ap.add_argument("--cache-type", choices=("f16", "q8_0"), default="f16",
                    help="KV cache type of both runs (ours: -ctk/-ctv, llama.cpp: type_k/type_v)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.peer_python.exists():
        print(f"error: {args.peer_python}: peer Python not found\nhint: run `make peer` first", file=sys.stderr)
        raise SystemExit(1)
    from kernelmap.runtime import default_model_path, load

    gguf = str(Path(args.model) if args.model else default_model_path())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_ctx in [int(c) for c in args.ctx.split(",")]:
            from kernelmap.cli.run_cmd import cache_policy
            from kernelmap.compiler import CompileOptions

            options = CompileOptions(policy=cache_policy(None, args.cache_type, args.cache_type))
            model = load(gguf, threads=args.threads, n_ctx=n_ctx, options=options)  # compiled (cached) before the runs
            with model:
                want = n_ctx - args.decode_tokens - 8
                text = TEXT
                while len(model.tokenizer.encode(text)) < want:
                    text += TEXT
                ids = model.tokenizer.encode(text)
                while len(ids) > want:  # cut whole words until the prompt fits
                    text = text.rsplit(" ", 1)[0]
                    ids = model.tokenizer.encode(text)
                kv_ours = _kv_bytes_ours(model)
            prompt = Path(tmp) / f"prompt{n_ctx}.txt"
            prompt.write_text(text, encoding="utf-8")
            ours = _ours(gguf, prompt, n_ctx, args.decode_tokens, args.threads, args.cache_type)
            peer = _peer(args.peer_python, gguf, ids, n_ctx, args.decode_tokens, args.threads, True, args.cache_type)
            row = {"n_ctx": n_ctx, "cache_type": args.cache_type, "prompt_tokens": len(ids), "decode_tokens": args.decode_tokens,
                   "ours_rss": ours["rss"], "ours_kv_bytes": kv_ours, "ours_prefill_tps": ours["prefill_tps"],
                   "ours_decode_tps": ours["decode_tps"], "llama_rss": peer["rss"], "llama_kv_bytes": peer["kv_bytes"],
                   "llama_compute_bytes": peer["compute_bytes"], "llama_prefill_tps": peer["prefill_tps"],
                   "llama_decode_tps": peer["decode_tps"], "peer_version": peer["version"],
                   "same_prompt_tokens": ours["prompt_tokens"] == len(ids),
                   "greedy_tokens_identical": ours["tokens"][: len(peer["tokens"])] == peer["tokens"][: len(ours["tokens"])]}
            if args.peer_small_swa:
                small = _peer(args.peer_python, gguf, ids, n_ctx, args.decode_tokens, args.threads, False,
                              args.cache_type)
                row.update(llama_small_swa_rss=small["rss"], llama_small_swa_kv_bytes=small["kv_bytes"],
                           llama_small_swa_prefill_tps=small["prefill_tps"],
                           llama_small_swa_decode_tps=small["decode_tps"])
            if not args.no_profile:
                row.update(_attention_share(gguf, ids, n_ctx, args.decode_tokens, args.threads, options.policy))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)  # each context as it completes (runs are long)
    _print(args, rows)


def _print(args: argparse.Namespace, rows: list[dict]) -> None:
    out = {"threads": args.threads, "results": rows}
    if args.json:
        print(json.dumps(out))
        return
    mib = 2**20
    kv = args.cache_type
    print(f"threads {args.threads}; llama.cpp {rows[0]['peer_version'] if rows else '?'} (flash attention, {kv} K/V, "
          f"n_ubatch 512, swa_full on); ours: kernelmap run -ctk {kv} -ctv {kv}")
    print(f"{'ctx':>6} {'prompt':>6} | {'RSS ours':>9} {'llama':>9} | {'KV ours':>8} {'llama':>8} | "
          f"{'prefill ours':>12} {'llama':>7} {'ratio':>5} | {'decode ours':>11} {'llama':>7} {'ratio':>5} | same")
    for r in rows:
        print(f"{r['n_ctx']:>6} {r['prompt_tokens']:>6} | {r['ours_rss'] / mib:>7.0f}Mi {r['llama_rss'] / mib:>7.0f}Mi | "
              f"{r['ours_kv_bytes'] / mib:>6.1f}Mi {r['llama_kv_bytes'] / mib:>6.1f}Mi | "
              f"{r['ours_prefill_tps']:>12.1f} {r['llama_prefill_tps']:>7.1f} "
              f"{r['ours_prefill_tps'] / r['llama_prefill_tps']:>5.2f} | {r['ours_decode_tps']:>11.1f} "
              f"{r['llama_decode_tps']:>7.1f} {r['ours_decode_tps'] / r['llama_decode_tps']:>5.2f} | "
              f"{r['greedy_tokens_identical']}")
    for r in rows:
        if "llama_small_swa_rss" in r:
            print(f"ctx {r['n_ctx']}: llama.cpp with swa_full off: RSS {r['llama_small_swa_rss'] / mib:.0f} MiB, "
                  f"KV {r['llama_small_swa_kv_bytes'] / mib:.1f} MiB, prefill {r['llama_small_swa_prefill_tps']:.1f}, "
                  f"decode {r['llama_small_swa_decode_tps']:.1f} tok/s (its SWA cells reused out of position order)")
        if "prefill_attention_share" in r:
            print(f"ctx {r['n_ctx']}: attention's share of op time (our --profile build): prefill "
                  f"{100 * r['prefill_attention_share']:.0f}%, decode {100 * r['decode_attention_share']:.0f}%")
    print(json.dumps(out), file=sys.stderr)


if __name__ == "__main__":
    main()
