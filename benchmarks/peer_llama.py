"""Peer side of the e2e benchmark: llama.cpp (llama-cpp-python) timing of one prefill and one decode run.

Run with the peer venv's Python (`.venv-peer/bin/python`); reads a JSON request on stdin
({model, tokens, n_decode, threads, n_ctx, flash_attn[, n_ubatch, repeats]}) and prints one JSON result line: prefill and
decode tokens/s from llama.cpp's own performance counters, plus the greedy tokens it produced.
"""

import json
import sys

import llama_cpp
import numpy as np


def main() -> None:
    req = json.loads(sys.stdin.read())
    llm = llama_cpp.Llama(model_path=req["model"], n_ctx=req["n_ctx"], n_threads=req["threads"],
                          n_threads_batch=req["threads"], n_batch=len(req["tokens"]), n_ubatch=req.get("n_ubatch", len(req["tokens"])),
                          flash_attn=req.get("flash_attn", False), verbose=False, logits_all=False, seed=0)
    out = []
    for _ in range(req.get("repeats", 1)):
        llm.reset()
        llama_cpp.llama_perf_context_reset(llm.ctx)
        llm.eval(req["tokens"])
        toks = []
        for _i in range(req["n_decode"]):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
            tok = int(np.argmax(logits))
            toks.append(tok)
            llm.eval([tok])
        perf = llama_cpp.llama_perf_context(llm.ctx)
        out.append({"prefill_tps": 1e3 * perf.n_p_eval / perf.t_p_eval_ms if perf.t_p_eval_ms else 0.0,
                     "decode_tps": 1e3 * perf.n_eval / perf.t_eval_ms if perf.t_eval_ms else 0.0,
                     "tokens": toks, "version": llama_cpp.__version__,
                     "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
