"""Peer fixtures with llama.cpp's flash attention, one token per eval: tests/fixtures/llama_fa[_t<N>]/{greedy,teacher}.json.

Same prompts, text and JSON format as tests/fixtures/make_llama_fixtures.py (whose helpers it imports),
but llama.cpp runs with flash_attn=True and, by default, n_batch = n_ubatch = 1 (prompts and the
teacher text evaluated token by token: the path our decode matches) on --threads N (default 1). From
position 256 on (a 512-cell KV view) ggml splits a decoded row's keys across its N threads, which rounds
differently: llama_fa (1 thread) is what policy llama-cpu reproduces, llama_fa_t2 what llama-cpu-t2 does.
Each file records the llama.cpp build and CPU path (tests/fixtures/peer_build.py).

    .venv-peer/bin/python -P tests/parity_fa/make_fa_fixtures.py [--threads N] [--out DIR]   # write fixtures
    .venv-peer/bin/python -P tests/parity_fa/make_fa_fixtures.py --compare [--threads N]      # live check

--compare records the same data live and runs `kernelmap parity --tier 2 --tier 3` (the project venv) with
the policy for N threads (or --cache-type q8_0: llama-cpu-kvq8) on it: exits 1 unless every claimed bar holds (all greedy prompts, every top-1,
top-5 logits to the fixture rounding, the perplexity). Nothing here runs in `make test`.

The policy also depends on the CPU the peer was built for (tests/fixtures/peer_build.py builds it for this host):
llama.cpp's AVX-512 build is what llama-cpu / -t<N> / -kvq8 reproduce; its AVX2 build (no AVX-512: e.g. an AMD
Zen 3 host) adds its flash attention's score dot on 8-float lanes, which llama-cpu-avx2 reproduces on 1 thread
with an f16 cache (fixtures tests/fixtures/llama_fa_avx2); with a q8_0 cache both builds compute the same bits
(llama-cpu-kvq8 on any thread count). For another combination no policy makes the claim:
--compare says so and exits 0 without comparing, and writing refuses the AVX-512 build's folders.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "llama_fa"
_BASE_PATH = ROOT / "tests" / "fixtures" / "make_llama_fixtures.py"

__all__ = ["settings", "record", "main"]


def _base():
    spec = importlib.util.spec_from_file_location("make_llama_fixtures", _BASE_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def settings(flash_attn: bool, sequential: bool, threads: int, cache_type: str = "f16") -> dict:
    """The llama.cpp settings recorded in the fixtures (the base SETTINGS with these choices applied)."""
    s = dict(_base().SETTINGS, type_k=cache_type, type_v=cache_type)
    n_batch = 1 if sequential else s["n_batch"]
    s.update(flash_attn=flash_attn, n_batch=n_batch, n_ubatch=n_batch, n_threads=threads, n_threads_batch=threads)
    return s


def _eval(llm, tokens: list[int], sequential: bool) -> None:
    if sequential:
        for t in tokens:
            llm.eval([t])
    else:
        llm.eval(tokens)


def record(model_path: str, cfg: dict, sequential: bool) -> tuple[dict, dict]:
    """Run llama.cpp with cfg; return (greedy fixture, teacher fixture) in make_llama_fixtures' format."""
    import llama_cpp

    base = _base()
    types = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32, "q8_0": llama_cpp.GGML_TYPE_Q8_0}
    kwargs = {k: v for k, v in cfg.items() if k not in ("type_k", "type_v", "swa_full")}
    llm = llama_cpp.Llama(model_path=model_path, type_k=types[cfg["type_k"]], type_v=types[cfg["type_v"]],
                          verbose=False, **kwargs)
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    from peer_build import peer_info

    peer = dict(cfg, sequential=sequential, **peer_info())
    model = {"file": Path(model_path).name, "bytes": os.path.getsize(model_path),
             "sha256": base._sha256(model_path)}
    head = {"peer": peer, "model": model}

    prompts = []
    for text in base.PROMPTS:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        llm.reset()
        _eval(llm, tokens, sequential)
        out, tops = [], []
        for step in range(base.N_GREEDY):
            logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            tok = int(np.argmax(logits))
            if step < base.N_TOP_STEPS:
                tops.append(base._top(logits, base.TOP_K))
            out.append(tok)
            if step + 1 < base.N_GREEDY:
                llm.eval([tok])
        prompts.append({"text": text, "tokens": [int(t) for t in tokens], "continuation": out, "top_logits": tops})
    greedy = dict(head, kind="greedy", n_greedy=base.N_GREEDY, top_k=base.TOP_K, top_steps=base.N_TOP_STEPS,
                  prompts=prompts)

    text = base.TEACHER_TEXT.read_text(encoding="utf-8")
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)[:base.TEACHER_TOKENS]
    if len(tokens) < base.TEACHER_TOKENS:
        raise SystemExit(f"{base.TEACHER_TEXT}: only {len(tokens)} tokens (need {base.TEACHER_TOKENS})")
    llm.reset()
    _eval(llm, tokens, sequential)
    scores = np.asarray(llm.scores[:len(tokens)], dtype=np.float32)
    tops = [base._top(row, base.TEACHER_TOP) for row in scores]
    top1 = [t["ids"][0] for t in tops]
    # noise floor: this run's top-1 against llama.cpp with the same settings but the other batching
    other_cfg = dict(kwargs, n_batch=base.SETTINGS["n_batch"] if sequential else 1)
    other_cfg["n_ubatch"] = other_cfg["n_batch"]
    del llm
    llm2 = llama_cpp.Llama(model_path=model_path, type_k=types[cfg["type_k"]], type_v=types[cfg["type_v"]],
                           verbose=False, **other_cfg)
    _eval(llm2, tokens, not sequential)
    other = np.asarray(llm2.scores[:len(tokens)], dtype=np.float32).argmax(axis=-1)
    teacher = dict(head, kind="teacher_forced", text_file=base.TEACHER_TEXT.name, tokens=[int(t) for t in tokens],
                   top1=top1, top5_ids=[t["ids"] for t in tops], top5_values=[t["values"] for t in tops],
                   perplexity=base._perplexity(scores, tokens),
                   peer_sequential_top1_agreement=float((other == np.asarray(top1)).mean()))
    return greedy, teacher


def _write(greedy: dict, teacher: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, data in (("greedy.json", greedy), ("teacher.json", teacher)):
        tmp = out / (name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(out / name)


def peer_isa() -> str:
    """'avx512' or 'avx2': which x86 build the llama.cpp importable here is (its system_info)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    return "avx512" if "AVX512 = 1" in info else "avx2" if "AVX2 = 1" in info else "other"


def policy_for(threads: int, cache_type: str = "f16", isa: str = "avx512") -> str | None:
    """The numerics policy that reproduces llama.cpp's `isa` build on `threads` threads (flash attention, one token
    per eval), None when none does; a q8_0 cache is never split across threads, so llama-cpu-kvq8 covers every
    thread count of the AVX-512 build."""
    if isa == "avx2":  # its q8_0-cache path is the AVX-512 build's (make_kvq8_op_fixtures.py on both: same bytes)
        if cache_type == "q8_0":
            return "llama-cpu-kvq8"
        return {1: "llama-cpu-avx2", 2: "llama-cpu-avx2-t2"}.get(threads)
    if isa != "avx512":
        return None
    if cache_type == "q8_0":
        return "llama-cpu-kvq8"
    return "llama-cpu" if threads == 1 else f"llama-cpu-t{threads}"


def default_out(threads: int, cache_type: str, isa: str) -> Path | None:
    """The committed fixture folder of this configuration, None when there is none."""
    if isa == "avx2":
        if cache_type != "f16" or threads not in (1, 2):
            return None
        return OUT.with_name("llama_fa_avx2" if threads == 1 else "llama_fa_avx2_t2")
    if isa != "avx512":
        return None
    return (OUT.with_name("llama_fa_kvq8") if cache_type == "q8_0" else
            OUT if threads == 1 else OUT.with_name(f"llama_fa_t{threads}"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF file (default: the default model package's file)")
    ap.add_argument("--out", type=Path, default=None, help="directory for greedy.json and teacher.json "
                    "(default: tests/fixtures/llama_fa, or llama_fa_t<N> for --threads N > 1)")
    ap.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--sequential", action=argparse.BooleanOptionalAction, default=True,
                    help="evaluate prompts one token per call (n_batch = n_ubatch = 1)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache-type", choices=("f16", "q8_0"), default="f16",
                    help="llama.cpp's type_k = type_v (q8_0: default --out tests/fixtures/llama_fa_kvq8)")
    ap.add_argument("--compare", action="store_true",
                    help="record live and run `kernelmap parity --tier 2 --tier 3` on it; exit 1 if a bar fails")
    args = ap.parse_args(argv)
    isa = peer_isa()
    policy = policy_for(args.threads, args.cache_type, isa)
    out = args.out or default_out(args.threads, args.cache_type, isa)
    what = f"llama.cpp's {isa} build on {args.threads} thread(s) with a {args.cache_type} cache"
    if args.compare and policy is None:
        print(f"SKIPPED: no numerics policy reproduces {what}: nothing to compare (see this script's docstring)")
        return 0
    if not args.compare and out is None:
        raise SystemExit(f"error: no committed fixture folder holds {what}; give --out DIR")
    model = args.model or _base().default_model()
    greedy, teacher = record(model, settings(args.flash_attn, args.sequential, args.threads, args.cache_type), args.sequential)
    if args.compare:
        with tempfile.TemporaryDirectory() as tmp:
            _write(greedy, teacher, Path(tmp))
            cmd = [str(ROOT / ".venv" / "bin" / "kernelmap"), "parity", "--tier", "2", "--tier", "3", "--no-reference",
                   "--fixtures", tmp, "--policy", policy, "-m", model]
            print("live llama.cpp (" + ", ".join(f"{k}={v}" for k, v in greedy["peer"].items() if k != "build")
                  + f") vs policy {policy}:", flush=True)
            return subprocess.run(cmd, check=False).returncode
    _write(greedy, teacher, out)
    print(f"wrote {out / 'greedy.json'} and {out / 'teacher.json'}; teacher perplexity "
          f"{teacher['perplexity']:.4f}, batched-vs-this top-1 agreement {teacher['peer_sequential_top1_agreement']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
