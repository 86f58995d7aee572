"""Peer fixtures with llama.cpp's flash attention, one token per eval: tests/fixtures/llama_fa/{greedy,teacher}.json.

Same prompts, text and JSON format as tests/fixtures/make_llama_fixtures.py (whose helpers it imports),
but llama.cpp runs with flash_attn=True and, by default, n_batch = n_ubatch = 1 (prompts and the
teacher text evaluated token by token: the path our decode matches) on 1 thread (ggml splits the KV
range across threads for one-row decode once n_kv >= 512, which changes the rounding; 1 thread keeps
the plain one-row path). Run with the peer venv: `.venv-peer/bin/python -P tests/parity_fa/make_fa_fixtures.py`.
Nothing here runs in `make test`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
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


def settings(flash_attn: bool, sequential: bool, threads: int) -> dict:
    """The llama.cpp settings recorded in the fixtures (the base SETTINGS with these choices applied)."""
    s = dict(_base().SETTINGS)
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
    types = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32}
    kwargs = {k: v for k, v in cfg.items() if k not in ("type_k", "type_v", "swa_full")}
    llm = llama_cpp.Llama(model_path=model_path, type_k=types[cfg["type_k"]], type_v=types[cfg["type_v"]],
                          verbose=False, **kwargs)
    peer = dict(cfg, sequential=sequential)
    peer["llama_cpp_python"] = llama_cpp.__version__
    peer["system_info"] = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF file (default: the default model package's file)")
    ap.add_argument("--out", type=Path, default=OUT, help="directory for greedy.json and teacher.json")
    ap.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--sequential", action=argparse.BooleanOptionalAction, default=True,
                    help="evaluate prompts one token per call (n_batch = n_ubatch = 1)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    model = args.model or _base().default_model()
    greedy, teacher = record(model, settings(args.flash_attn, args.sequential, args.threads), args.sequential)
    _write(greedy, teacher, args.out)
    print(f"wrote {args.out / 'greedy.json'} and {args.out / 'teacher.json'}; teacher perplexity "
          f"{teacher['perplexity']:.4f}, batched-vs-this top-1 agreement {teacher['peer_sequential_top1_agreement']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
