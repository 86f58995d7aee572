"""The family ops' kernels, fed llama.cpp's own inputs, return llama.cpp's own outputs bit for bit.

Fixture: tests/fixtures/families/ops/*.npz (make_family_fixtures.py: tiny synthetic models of each family run
by llama.cpp with flash attention, f16 KV, 1 thread, one token per decode; the graph tensors of one layer at
positions 0..5 copied by an eval callback). Weights come from the committed fixture models or, for models
that are not committed (qwen3moe_wide), from the npz. Every case runs each variant this host can run of the
provider whose contract the llama-cpu policy names and requires 0 differing elements.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np
import pytest
from kernel_harness import bind, host_can_run, load_map, ptr

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared
from kernelmap.gguf import open_gguf
from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy
from kernelmap.weights.repack import REPACKED

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "families"
F = np.float32
POSITIONS = range(6)
EPS = {"llama": 1e-5, "qwen2": 1e-6, "qwen3": 1e-6, "phi3": 1e-5, "qwen3moe": 1e-6}


@pytest.fixture(scope="module")
def manifest():
    return json.loads((FIX / "manifest.json").read_text())


def _ops(name):
    z = np.load(FIX / "ops" / f"{name}.npz")
    return {k: z[k] for k in z.files}


def _weight(manifest, name, tensor):
    entry = manifest["ops"][name]
    d = _ops(name)
    if f"weight:{tensor}" in d:
        return np.ascontiguousarray(d[f"weight:{tensor}"]), "f32"
    g = open_gguf(FIX / entry["model"])
    info = g.tensors[tensor]
    data = np.array(g.tensor_data(tensor)) if info.type_name != "f32" else np.array(g.tensor_array(tensor))
    g.close()
    return np.ascontiguousarray(data), info.type_name


def _provider(op, **keys):
    contract = load_policy("llama-cpu").rule_for(op, **keys).contract
    # batch row wrappers (maps with `calls`) share the contract; test_batch_rows.py checks them per row; providers
    # reading a repacked weight layout are checked against the GGUF-layout provider's ref bit for bit
    # (tests/kernels/test_linear_q32_r8.py) and against llama.cpp in test_ops_vs_llama*.py
    ids = [p.id for p in load_registry().by_op(op)
           if p.contract == contract and p.status == "production" and not p.raw.get("calls")
           and not any(w.layout in REPACKED for w in p.weights)]
    assert len(ids) == 1, f"{op} {keys}: {ids}"
    return ids[0]


_LIBS: dict[str, tuple] = {}


def _fns(map_id):
    """(variant name, ctypes function) for ref and the host's highest-priority runnable variant."""
    spec = load_map(map_id)
    runnable = [v for v in spec["variants"] if host_can_run(v["requires"])[0]]
    pick = {"ref", max(runnable, key=lambda v: v["priority"])["name"]}
    if map_id not in _LIBS:
        units = [CompileUnit(KERNEL_ROOT / v["source"], tuple(v["cflags"])) for v in spec["variants"] if v["name"] in pick]
        _LIBS[map_id] = (ctypes.CDLL(str(build_shared(units, name=f"test_vs_llama_{map_id}"))), spec)
    lib, spec = _LIBS[map_id]
    return [(n, bind(lib, spec, n)) for n in sorted(pick)]


def _bad(got, want):
    return int(np.sum(np.asarray(got, F).reshape(-1).view(np.uint32) != np.asarray(want, F).reshape(-1).view(np.uint32)))


def _check(bad: dict[str, int]):
    assert bad and not any(bad.values()), f"differing elements per provider.variant: {bad}"


def _quantize(act, x):
    lib_id = _provider("quantize_act", activation=act)
    (_, fn), *_ = _fns(lib_id)
    k = x.shape[-1]
    rows = x.size // k
    bs, nb = {"q8_0": (32, 34), "q8_k": (256, 292)}[act]
    y = np.zeros(rows * (k // bs) * nb, np.uint8)
    xc = np.ascontiguousarray(x, F)
    fn(ptr(y), ptr(xc), rows, k, 0, 1)
    return y


def test_bias_add_llama_inputs_give_llama_outputs(manifest):
    d, bad = _ops("qwen2"), {}
    map_id = _provider("bias_add")
    for proj, name in (("attn_q", "Qcur"), ("attn_k", "Kcur"), ("attn_v", "Vcur")):
        b, _ = _weight(manifest, "qwen2", f"blk.1.{proj}.bias")
        for t in POSITIONS:
            x = np.ascontiguousarray(d[f"{t}:{name}-1"], F)
            for vname, fn in _fns(map_id):
                y = np.zeros_like(x)
                fn(ptr(y), ptr(x), ptr(b), 1, x.size, 0, 1)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _bad(y, d[f"{t}:{name}-1#2"])
    _check(bad)


@pytest.mark.parametrize("name,style,src,dst,head_dim,base", [
    ("llama", "normal", "#2", "#3", 64, 500000.0),        # rope_ff: Llama 3 frequency factors
    ("llama_plain", "normal", "#2", "#3", 64, 500000.0),  # plain normal RoPE (no factors)
    ("qwen2", "neox", "#3", "#4", 64, 1e6),               # NeoX RoPE after the biases
])
def test_rope_ff_llama_inputs_give_llama_outputs(manifest, name, style, src, dst, head_dim, base):
    d, bad = _ops(name), {}
    factors = name == "llama"
    map_id = _provider("rope_ff" if factors else "rope", style=style)
    f = _weight(manifest, name, "rope_freqs.weight")[0] if factors else None
    for cur in ("Qcur", "Kcur"):
        for t in POSITIONS:
            x = np.ascontiguousarray(d[f"{t}:{cur}-1{src}"], F)
            h = x.size // head_dim
            for vname, fn in _fns(map_id):
                y = np.zeros_like(x)
                args = [ptr(y), ptr(x)] + ([ptr(f)] if factors else []) + [1, h, head_dim, t, ctypes.c_float(base),
                                                                            ctypes.c_float(1.0), 0, 1]
                fn(*args)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _bad(y, d[f"{t}:{cur}-1{dst}"])
    _check(bad)


@pytest.mark.parametrize("name,q,k,head_dim,heads,kv_heads", [
    ("llama", "Qcur-1#3", "Kcur-1#3", 64, 4, 2),
    ("qwen3", "Qcur-1#3", "Kcur-1#3", 128, 2, 1),
])
def test_attention_kq_llama_inputs_give_llama_outputs(name, q, k, head_dim, heads, kv_heads):
    d, bad = _ops(name), {}
    map_id = _provider("attention_kq")
    scale = ctypes.c_float(np.float32(1.0) / np.sqrt(np.float32(head_dim)))
    n = len(POSITIONS)
    kc = np.ascontiguousarray(np.stack([d[f"{t}:{k}"].reshape(kv_heads, head_dim) for t in POSITIONS], 1).astype(np.float16))
    vc = np.ascontiguousarray(np.stack([d[f"{t}:Vcur-1"].reshape(kv_heads, head_dim) for t in POSITIONS], 1).astype(np.float16))
    for t in POSITIONS:
        qt = np.ascontiguousarray(d[f"{t}:{q}"], F)
        for vname, fn in _fns(map_id):
            y = np.zeros_like(qt)
            fn(ptr(y), ptr(qt), ptr(kc), ptr(vc), 1, heads, kv_heads, head_dim, n, t, scale, 0, 0, 1)
            bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _bad(y, d[f"{t}:kqv_out-1"])
    _check(bad)


def test_phi3_row_slices_and_prescaled_attention_give_llama_outputs(manifest):
    """Phi-3: the fused QKV read as three row slices, Q scaled before attention (contract ggml_fa), gate/up halves."""
    d, bad = _ops("phi3"), {}
    w, wtype = _weight(manifest, "phi3", "blk.1.attn_qkv.weight")
    lin = _provider("linear", weight=wtype)
    act = load_policy("llama-cpu").rule_for("linear", weight=wtype).activation
    row = w.size // 768
    for t in POSITIONS:
        xq = _quantize(act, d[f"{t}:attn_norm-1"])
        for lo, hi in ((0, 256), (256, 512), (512, 768)):
            ws = np.ascontiguousarray(w[lo * row:hi * row])
            for vname, fn in _fns(lin):
                y = np.zeros(hi - lo, F)
                fn(ptr(y), ptr(ws), ptr(xq), 1, hi - lo, 256, 0, 1)
                bad[f"{lin}.{vname}"] = bad.get(f"{lin}.{vname}", 0) + _bad(y, d[f"{t}:wqkv-1"][lo:hi])
    att = _provider("attention")
    kc = np.ascontiguousarray(np.stack([d[f"{t}:Kcur-1#2"].reshape(4, 64) for t in POSITIONS], 1).astype(np.float16))
    vc = np.ascontiguousarray(np.stack([d[f"{t}:Vcur-1"].reshape(4, 64) for t in POSITIONS], 1).astype(np.float16))
    scale = ctypes.c_float(np.float32(1.0) / np.sqrt(np.float32(64)))
    for t in POSITIONS:
        qt = np.ascontiguousarray(d[f"{t}:Qcur-1#2"], F)
        for vname, fn in _fns(att):
            y = np.zeros_like(qt)
            fn(ptr(y), ptr(qt), ptr(kc), ptr(vc), 1, 4, 4, 64, len(POSITIONS), t, scale, 0, 0, 1)
            bad[f"{att}.{vname}"] = bad.get(f"{att}.{vname}", 0) + _bad(y, d[f"{t}:kqv_out-1"])
        gu = d[f"{t}:ffn_up-1"]
        _swiglu_bad(bad, gu[:256], gu[256:], d[f"{t}:ffn_swiglu-1"])
    _check(bad)


def _swiglu_bad(bad, gate, up, want):
    map_id = _provider("swiglu")
    g, u = np.ascontiguousarray(gate, F), np.ascontiguousarray(up, F)
    for vname, fn in _fns(map_id):
        y = np.zeros_like(g)
        fn(ptr(y), ptr(g), ptr(u), 1, g.size, 0, 1)
        bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _bad(y, want)


@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_swiglu_llama_inputs_give_llama_outputs(name):
    d, bad = _ops(name), {}
    for t in POSITIONS:
        _swiglu_bad(bad, d[f"{t}:ffn_gate-1"], d[f"{t}:ffn_up-1"], d[f"{t}:ffn_swiglu-1"])
    _check(bad)


@pytest.mark.parametrize("name,n_experts,used", [("qwen3moe", 4, 2), ("qwen3moe_wide", 32, 4)])
def test_moe_router_llama_inputs_give_llama_outputs(manifest, name, n_experts, used):
    """Router logits in ggml_vec_dot_f32's order, softmax (vector exp for whole blocks of 16), std::sort, norm."""
    d, bad = _ops(name), {}
    w, wtype = _weight(manifest, name, "blk.0.ffn_gate_inp.weight")
    assert wtype == "f32"
    map_id = _provider("moe_router", weight="f32")
    for t in POSITIONS:
        x = np.ascontiguousarray(d[f"{t}:ffn_norm-0"], F)
        for vname, fn in _fns(map_id):
            ids = np.zeros(used, np.int32)
            wts = np.zeros(used, F)
            fn(ptr(ids), ptr(wts), ptr(x), ptr(w.reshape(-1)), 1, n_experts, used, x.size, 1, ctypes.c_float(0.0), 0, 1)
            key = f"{map_id}.{vname}"
            bad[key] = bad.get(key, 0) + int(np.sum(ids != d[f"{t}:ffn_moe_topk-0"]))
            bad[key] += _bad(wts, d[f"{t}:ffn_moe_weights_norm-0"])
    _check(bad)


def test_moe_linear_llama_inputs_give_llama_outputs(manifest):
    """Expert up/gate on the token row, down on each slot's SwiGLU row: llama.cpp's mul_mat_id outputs."""
    d, bad = _ops("qwen3moe"), {}
    used, f, dm = 2, 256, 256
    for proj, src, dst, xs in (("ffn_up_exps", "ffn_norm-0", "ffn_moe_up-0", 1),
                               ("ffn_gate_exps", "ffn_norm-0", "ffn_moe_gate-0", 1),
                               ("ffn_down_exps", "ffn_moe_swiglu-0", "ffn_moe_down-0", used)):
        w, wtype = _weight(manifest, "qwen3moe", f"blk.0.{proj}.weight")
        map_id = _provider("moe_linear", weight=wtype)
        act = load_policy("llama-cpu").rule_for("moe_linear", weight=wtype).activation
        n = dm if xs > 1 else f
        k = f if xs > 1 else dm
        for t in POSITIONS:
            ids = np.ascontiguousarray(d[f"{t}:ffn_moe_topk-0"].astype(np.int32))
            xq = _quantize(act, d[f"{t}:{src}"].reshape(xs, k))
            for vname, fn in _fns(map_id):
                y = np.zeros(used * n, F)
                fn(ptr(y), ptr(w), ptr(xq), ptr(ids), 1, used, xs, 4, n, k, 0, 1)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _bad(y, d[f"{t}:{dst}"])
    _check(bad)


def test_moe_combine_llama_inputs_give_llama_outputs():
    d, bad = _ops("qwen3moe"), {}
    map_id = _provider("moe_combine")
    for t in POSITIONS:
        x = np.ascontiguousarray(d[f"{t}:ffn_moe_down-0"], F)
        w = np.ascontiguousarray(d[f"{t}:ffn_moe_weights_norm-0"], F)
        for vname, fn in _fns(map_id):
            y = np.zeros(256, F)
            fn(ptr(y), ptr(x), ptr(w), 1, 2, 256, 0, 1)
            bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _bad(y, d[f"{t}:ffn_moe_out-0"])
        _swiglu_bad(bad, d[f"{t}:ffn_moe_gate-0"], d[f"{t}:ffn_moe_up-0"], d[f"{t}:ffn_moe_swiglu-0"])
    _check(bad)
