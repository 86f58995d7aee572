"""Parity check: the flash-attention emulation and the reference forward vs llama.cpp (flash_attn=True, n_batch=1).

Runs llama.cpp (peer venv, one token per llama_decode, f16 KV cache) with an eval callback that keeps
each layer's post-rope Qcur, Kcur, Vcur and the attention output kqv_out, plus all logits. Two checks
per text (a 6-token prompt and a 64-token text): "isolated" feeds llama.cpp's own Q/K/V into
fa_emulation.attention and compares with llama.cpp's attention output (the attention contract alone,
expected 0 everywhere); "pipeline" runs the reference forward with ops.attention replaced by the
emulation and compares logits (also measures every other op of the reference). A manual tool:
`.venv/bin/python -P tests/parity_fa/check_peer.py [--no-pipeline]`; nothing here runs in `make test`.
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


def _model() -> str:
    """The default model's GGUF path (this tool runs in the project venv)."""
    from kernelmap.runtime import default_model_path

    return str(default_model_path())

PROMPT6 = [2, 818, 5279, 529, 7001, 563]
TEXT64 = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
          "combined movable metal type, oil-based ink and a wooden screw press. Within a few decades, "
          "printers across Europe were producing books faster and more cheaply than scribes ever could, "
          "and the spread of ideas accelerated in science, religion and politics alike.")

_PEER = r"""
import ctypes, json, sys
import numpy as np
import llama_cpp as L

req = json.loads(sys.argv[1])


class Tensor(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64)]


store, step = {}, [0]
want = tuple(req["names"])


def read(t):
    dt = {0: np.float32, 1: np.float16}.get(t.type)
    if dt is None:
        return None
    ne, nb = list(t.ne), list(t.nb)
    span = sum((ne[i] - 1) * nb[i] for i in range(4)) + np.dtype(dt).itemsize
    raw = bytes((ctypes.c_char * span).from_address(t.data))
    return np.lib.stride_tricks.as_strided(np.frombuffer(raw, dt), ne[::-1], nb[::-1]).astype(np.float32)


@L.ggml_backend_sched_eval_callback
def cb(tp, ask, _ud):
    t = Tensor.from_address(tp)
    name = t.name.decode()
    hit = name.split("-")[0] in want and " " not in name
    if ask or not hit:
        return hit if ask else True
    key = f"{step[0]}:{name}"
    store[key] = read(t)  # a later tensor of the same name (post-rope Qcur/Kcur) replaces the first
    return True


L.llama_backend_init()
model = L.llama_model_load_from_file(req["model"].encode(), L.llama_model_default_params())
cp = L.llama_context_default_params()
cp.n_ctx, cp.n_batch, cp.n_ubatch = req["n_ctx"], 1, 1
cp.n_threads = cp.n_threads_batch = req["threads"]
cp.flash_attn_type = 1
cp.type_k = cp.type_v = 1
if want:
    cp.cb_eval = cb
ctx = L.llama_init_from_model(model, cp)
vocab = L.llama_model_get_vocab(model)
toks = req["tokens"]
if req.get("text"):
    text = req["text"].encode("utf-8")
    buf = (L.llama_token * (len(text) + 8))()
    n = L.llama_tokenize(vocab, text, len(text), buf, len(buf), True, False)
    toks = list(buf[:n])[: req["n"]]
nv = L.llama_vocab_n_tokens(vocab)
rows = []
for i, tok in enumerate(toks):
    step[0] = i
    arr = (L.llama_token * 1)(tok)
    if L.llama_decode(ctx, L.llama_batch_get_one(arr, 1)) != 0:
        raise SystemExit("llama_decode failed")
    rows.append(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(nv,)).copy())
store["logits"] = np.array(rows, dtype=np.float32)
np.savez(req["out"], **store)
print(json.dumps([int(t) for t in toks]))
"""

__all__ = ["peer_run", "isolated_diffs", "reference_logits", "kernel_attention", "compare_fixtures", "main"]

_NAMES = ["Qcur", "Kcur", "Vcur", "kqv_out"]


def peer_run(tokens: list[int] | None = None, text: str | None = None, n: int = 64, threads: int = 2,
             n_ctx: int = 256, dump: bool = True) -> tuple[list[int], dict[str, np.ndarray]]:
    """llama.cpp one token per decode with flash attention; returns (tokens, {"logits": [T, V], "t:name-il": ...})."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "peer.npz")
        req = {"model": _model(), "tokens": tokens or [], "text": text, "n": n, "out": out, "threads": threads,
               "n_ctx": n_ctx, "names": _NAMES if dump else []}
        res = subprocess.run([str(PEER_PY), "-P", "-c", _PEER, json.dumps(req)], check=True,
                             capture_output=True, text=True)
        toks = json.loads(res.stdout.strip().splitlines()[-1])
        with np.load(out) as z:
            return toks, {k: z[k] for k in z.files}


def isolated_diffs(dump: dict[str, np.ndarray], n_layer: int, n_head: int, head_dim: int,
                   scale: float) -> np.ndarray:
    """max |emulation - llama.cpp| of the attention output per (layer, position), from llama.cpp's own inputs."""
    sys.path.insert(0, str(HERE))
    import fa_emulation

    n_tok = dump["logits"].shape[0]
    out = np.zeros((n_layer, n_tok))
    for il in range(n_layer):
        k = np.stack([dump[f"{t}:Kcur-{il}"].reshape(-1) for t in range(n_tok)])
        v = np.stack([dump[f"{t}:Vcur-{il}"].reshape(-1) for t in range(n_tok)])
        kc = k.reshape(n_tok, -1, head_dim).transpose(1, 0, 2)
        vc = v.reshape(n_tok, -1, head_dim).transpose(1, 0, 2)
        for t in range(n_tok):
            q = dump[f"{t}:Qcur-{il}"].reshape(1, -1)
            got = dump[f"{t}:kqv_out-{il}"].reshape(-1)
            y = fa_emulation.attention(q, kc, vc, n_head, t, scale, 0)[0]
            out[il, t] = np.abs(y - got).max()
    return out


def _emulate_linears(ref) -> None:
    """Route the reference's q5_0 / q8_0 / q4_K matmuls through linear_emulation (llama.cpp's x86 order)."""
    import ggml_linear_orders as le

    import gguf

    raw = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(_model()).tensors}
    by_id = {}
    for i, lw in enumerate(ref.layers):
        for key, val in lw.items():
            name = f"blk.{i}.{key}.weight"
            if isinstance(val, tuple) and name in raw:
                by_id[id(val[0])] = raw[name].reshape(raw[name].shape[0], -1)
    out_w = ref._output_matrix()[0]
    by_id[id(out_w)] = raw["token_embd.weight"].reshape(raw["token_embd.weight"].shape[0], -1)
    plain = ref._linear

    def linear(x, w):
        data, kind = w
        if id(data) in by_id and kind.lower() in ("q5_0", "q8_0"):
            return le.linear_q0(x, by_id[id(data)], kind.lower())
        if id(data) in by_id and kind.lower() == "q4_k":
            return le.linear_q4_k_repacked(x, by_id[id(data)])
        return plain(x, w)

    ref._linear = linear


def reference_logits(tokens: list[int], policy: str = "llama-cpp-cpu", emulate_linear: bool = False) -> np.ndarray:
    """The reference's logits [T, V] for all rows, its attention replaced by the emulation."""
    sys.path.insert(0, str(HERE))
    import fa_emulation

    from kernelmap.reference import ops
    from kernelmap.reference.forward import Reference

    def fa(q, k_cache, v_cache, n_q_heads, pos0, scale, window=0, *_args, **_kw):
        return fa_emulation.attention(q, k_cache, v_cache, n_q_heads, pos0, scale, window)

    ops.attention = fa
    ref = Reference(_model(), policy=policy, n_ctx=256)
    if emulate_linear:
        _emulate_linears(ref)
    return ref.prefill(tokens, "all")


def kernel_attention(variant: str = "avx512"):
    """An ops.attention replacement that calls the compiled attention_f16kv_ggmlfa kernel (fast, same bits)."""
    import ctypes

    from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared

    spec = json.loads((KERNEL_ROOT.parent / "kernel_maps" / "attention_f16kv_ggmlfa.json").read_text())
    v = next(x for x in spec["variants"] if x["name"] == variant)
    lib = ctypes.CDLL(str(build_shared([CompileUnit(KERNEL_ROOT / v["source"], tuple(v["cflags"]))],
                                       name="parity_fa_attention")))
    fn = getattr(lib, v["symbol"])
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [vp, vp, vp, vp, i64, i64, i64, i64, i64, i64, ctypes.c_float, i64, ctypes.c_int, ctypes.c_int]
    fn.restype = None

    def attention(q, k_cache, v_cache, n_q_heads, pos0, scale, window=0, *_args, **_kw):
        q = np.ascontiguousarray(q, dtype=np.float32)
        hkv, c, d = k_cache.shape
        kc = np.ascontiguousarray(k_cache, dtype=np.float32).astype(np.float16)
        vc = np.ascontiguousarray(v_cache, dtype=np.float32).astype(np.float16)
        y = np.empty_like(q)
        fn(y.ctypes.data, q.ctypes.data, kc.ctypes.data, vc.ctypes.data, q.shape[0], n_q_heads, hkv, d, c, pos0,
           scale, window, 0, 1)
        return y

    return attention


def compare_fixtures(fixtures: Path, policy: str) -> dict:
    """make_llama_fixtures.compare_reference on a fixture directory, the reference's attention = the kernel."""
    import importlib.util

    from kernelmap.reference import ops

    spec = importlib.util.spec_from_file_location("make_llama_fixtures", ROOT / "tests/fixtures/make_llama_fixtures.py")
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    ops.attention = kernel_attention()
    greedy = json.loads((fixtures / "greedy.json").read_text(encoding="utf-8"))
    teacher = json.loads((fixtures / "teacher.json").read_text(encoding="utf-8"))
    return base.compare_reference(greedy, teacher, _model(), policy)


def _line(values: np.ndarray) -> str:
    return " ".join(f"{x:.2g}" for x in values)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--policy", default="llama-cpp-cpu")
    ap.add_argument("--no-pipeline", action="store_true", help="skip the reference forward comparison")
    ap.add_argument("--only6", action="store_true", help="only the 6-token prompt")
    ap.add_argument("--emulate-linear", action="store_true",
                    help="pipeline: q5_0/q8_0/q4_K matmuls in llama.cpp's x86 order (linear_emulation.py)")
    ap.add_argument("--fixtures", type=Path, help="instead: compare the reference (attention = the kernel) "
                    "with a fixture directory such as tests/fixtures/llama_fa")
    args = ap.parse_args(argv)
    if args.fixtures:
        print(json.dumps(compare_fixtures(args.fixtures, args.policy), indent=1))
        return 0
    runs = [("prompt6", {"tokens": PROMPT6})] + ([] if args.only6 else [("text64", {"text": TEXT64, "n": 64})])
    worst_iso = 0.0
    for name, kw in runs:
        toks, dump = peer_run(threads=args.threads, **kw)
        iso = isolated_diffs(dump, n_layer=18, n_head=4, head_dim=256, scale=1.0 / 16.0)
        worst_iso = max(worst_iso, float(iso.max()))
        print(f"{name} ({len(toks)} tokens) isolated attention: max|diff| {iso.max():.3g} over 18 layers; "
              f"per position (max over layers): {_line(iso.max(axis=0))}")
        if not args.no_pipeline:
            ours = reference_logits(toks, args.policy, args.emulate_linear)
            diff = np.abs(dump["logits"].astype(np.float64) - ours).max(axis=-1)
            agree = (dump["logits"].argmax(axis=-1) == ours.argmax(axis=-1)).mean()
            print(f"{name} pipeline logits (policy {args.policy}): top-1 agreement {agree:.3f}; max|diff| per "
                  f"position: {_line(diff)}")
    print(f"worst isolated attention max|diff| {worst_iso:.3g}")
    return 0 if worst_iso == 0.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
