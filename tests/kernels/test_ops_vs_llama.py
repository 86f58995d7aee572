"""Every kernel the llama-cpu policy selects, fed llama.cpp's own inputs, must return llama.cpp's own outputs bit for bit.

Fixture: tests/fixtures/llama_ops (make_op_fixtures.py: llama.cpp with flash attention, f16 KV, 1 thread, one token
per decode, layers 0 and 2 of the real model, 6 positions). Each case runs one op of one layer at one position
through every variant this host can run of the provider whose contract the policy names, and compares with
llama.cpp's tensor exactly (0 differing elements). Real-model weights come from the default model file.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np
import pytest
from kernel_harness import bind, host_can_run, load_map_library, ptr

from kernelmap.gguf import open_gguf
from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llama_ops"
POLICY = "llama-cpu"
EPS = 1e-6
HEAD_DIM, N_HEAD, N_HEAD_KV = 256, 4, 1
SCALE = np.float32(1.0 / 16.0)  # 1/sqrt(head_dim)
ROPE_BASE = {0: 10000.0, 2: 10000.0}  # both fixture layers are sliding-window layers
WINDOW = 512


@pytest.fixture(scope="module")
def fx():
    z = np.load(FIXTURES / "ops.npz")
    settings = json.loads((FIXTURES / "settings.json").read_text(encoding="utf-8"))
    return {k: z[k] for k in z.files}, settings


@pytest.fixture(scope="module")
def weights():
    from kernelmap.runtime import default_model_path

    g = open_gguf(default_model_path())
    yield _Weights(g)
    g.close()


class _Weights:
    """name -> (raw bytes as a read-only uint8 view, GGML type name) of the real model's tensors."""

    def __init__(self, g) -> None:
        self._g = g

    def __getitem__(self, name: str) -> tuple[np.ndarray, str]:
        return self._g.tensor_data(name), self._g.tensors[name].type_name


def _providers(op: str, **keys: str) -> list[str]:
    contract = load_policy(POLICY).rule_for(op, **keys).contract
    ids = [p.id for p in load_registry().by_op(op) if p.contract == contract and p.status == "production"]
    assert ids, f"no production provider implements {contract}"
    return ids


def _variants(map_id: str):
    lib, spec = load_map_library(map_id)
    for v in spec["variants"]:
        if host_can_run(v["requires"])[0]:
            yield v["name"], bind(lib, spec, v["name"])


def _mismatch(got: np.ndarray, want: np.ndarray) -> int:
    return int((np.asarray(got, np.float32).reshape(-1) != np.asarray(want, np.float32).reshape(-1)).sum())


def _quantize(act: str, x: np.ndarray) -> np.ndarray:
    map_id = _providers("quantize_act", activation=act)[0]
    lib, spec = load_map_library(map_id)
    fn = bind(lib, spec, "ref")
    k = x.shape[-1]
    nbytes = {"q8_0": k // 32 * 34, "q8_k": k // 256 * 292}[act]
    y = np.zeros(nbytes, np.uint8)
    x = np.ascontiguousarray(x, np.float32)
    fn(ptr(y), ptr(x), 1, k, 0, 1)
    return y


def _linear_all(weights, name: str, x: np.ndarray, rows: int | None = None) -> dict[str, np.ndarray]:
    raw, wtype = weights[name]
    policy = load_policy(POLICY)
    rule = policy.rule_for("linear", weight=wtype)
    xq = _quantize(rule.activation, x)
    k = x.shape[-1]
    n_total = _rows(raw, wtype, k)
    n = rows or n_total
    w = np.ascontiguousarray(raw[: raw.size // n_total * n])
    out = {}
    for map_id in _providers("linear", weight=wtype):
        for vname, fn in _variants(map_id):
            y = np.zeros(n, np.float32)
            fn(ptr(y), ptr(w), ptr(xq), 1, n, k, 0, 1)
            out[f"{map_id}.{vname}"] = y
    return out


def _rows(raw: np.ndarray, wtype: str, k: int) -> int:
    block = {"q8_0": (32, 34), "q5_0": (32, 22), "q4_k": (256, 144), "q6_k": (256, 210)}[wtype]
    return raw.size // (k // block[0] * block[1])


def _f32(fx, key: str) -> np.ndarray:
    return np.ascontiguousarray(fx[0][key], np.float32)


POSITIONS = range(6)
LAYERS = (0, 2)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("proj,out", [("attn_q", "Qcur"), ("attn_k", "Kcur"), ("attn_v", "Vcur"),
                                      ("ffn_gate", "ffn_gate"), ("ffn_up", "ffn_up"), ("ffn_down", "ffn_out")])
def test_linear_llama_inputs_gives_llama_outputs(fx, weights, layer, proj, out):
    src = "ffn_geglu" if proj == "ffn_down" else ("ffn_norm" if proj.startswith("ffn") else "attn_norm")
    bad = {}
    for t in POSITIONS:
        got = _linear_all(weights, f"blk.{layer}.{proj}.weight", _f32(fx, f"{t}:{src}-{layer}"))
        for key, y in got.items():
            bad[key] = bad.get(key, 0) + _mismatch(y, fx[0][f"{t}:{out}-{layer}"])
    assert bad and not any(bad.values()), bad


def test_lm_head_llama_inputs_gives_llama_logits(fx, weights):
    cols = fx[1]["head_cols"]
    bad = {}
    for t in POSITIONS:
        got = _linear_all(weights, "token_embd.weight", _f32(fx, f"{t}:result_norm"), rows=cols)
        for key, y in got.items():
            bad[key] = bad.get(key, 0) + _mismatch(y, fx[0][f"{t}:logits"])
    assert bad and not any(bad.values()), bad


@pytest.mark.parametrize("layer", LAYERS)
def test_attention_output_projection_and_norm_give_llama_post_norm(fx, weights, layer):
    lib, spec = load_map_library(_providers("rmsnorm")[0])
    norm = bind(lib, spec, "ref")
    w = np.ascontiguousarray(np.frombuffer(weights[f"blk.{layer}.post_attention_norm.weight"][0], np.float32))
    bad = {}
    for t in POSITIONS:
        for key, o in _linear_all(weights, f"blk.{layer}.attn_output.weight", _f32(fx, f"{t}:kqv_out-{layer}")).items():
            y = np.zeros_like(o)
            norm(ptr(y), ptr(o), ptr(w), 1, o.size, ctypes.c_float(EPS), 0, 1)
            bad[key] = bad.get(key, 0) + _mismatch(y, fx[0][f"{t}:attn_post_norm-{layer}"])
    assert bad and not any(bad.values()), bad


@pytest.mark.parametrize("layer", LAYERS)
def test_qk_norm_rope_attention_give_llama_outputs(fx, weights, layer):
    d = fx[0]
    bad = {}
    qn = np.ascontiguousarray(np.frombuffer(weights[f"blk.{layer}.attn_q_norm.weight"][0], np.float32))
    kn = np.ascontiguousarray(np.frombuffer(weights[f"blk.{layer}.attn_k_norm.weight"][0], np.float32))
    eps, base = ctypes.c_float(EPS), ctypes.c_float(ROPE_BASE[layer])
    one = ctypes.c_float(1.0)
    for map_id in _providers("qk_norm_rope", style="neox"):
        for vname, fn in _variants(map_id):
            for t in POSITIONS:
                for src, w, h, want in [("Qcur", qn, N_HEAD, "Qcur"), ("Kcur", kn, N_HEAD_KV, "Kcur")]:
                    x = _f32(fx, f"{t}:{src}-{layer}")
                    y = np.zeros_like(x)
                    fn(ptr(y), ptr(x), ptr(w), 1, h, HEAD_DIM, t, eps, base, one, 0, 1)
                    key = f"{map_id}.{vname}"
                    bad[key] = bad.get(key, 0) + _mismatch(y, d[f"{t}:{want}-{layer}#3"])
    n = len(POSITIONS)
    kc = np.stack([d[f"{t}:Kcur-{layer}#3"] for t in POSITIONS]).astype(np.float16)
    vc = np.stack([d[f"{t}:Vcur-{layer}"] for t in POSITIONS]).astype(np.float16)
    for map_id in _providers("attention"):
        for vname, fn in _variants(map_id):
            for t in POSITIONS:
                q = _f32(fx, f"{t}:Qcur-{layer}#3")
                y = np.zeros_like(q)
                fn(ptr(y), ptr(q), ptr(kc), ptr(vc), 1, N_HEAD, N_HEAD_KV, HEAD_DIM, n, t, ctypes.c_float(SCALE),
                   WINDOW, 0, 1)
                key = f"{map_id}.{vname}"
                bad[key] = bad.get(key, 0) + _mismatch(y, d[f"{t}:kqv_out-{layer}"])
    assert bad and not any(bad.values()), bad


@pytest.mark.parametrize("layer", LAYERS)
def test_ffn_elementwise_and_norms_give_llama_outputs(fx, weights, layer):
    d = fx[0]
    bad = {}
    w_post = np.ascontiguousarray(np.frombuffer(weights[f"blk.{layer}.post_ffw_norm.weight"][0], np.float32))
    w_ffn = np.ascontiguousarray(np.frombuffer(weights[f"blk.{layer}.ffn_norm.weight"][0], np.float32))
    eps = ctypes.c_float(EPS)
    for t in POSITIONS:
        for map_id in _providers("geglu"):
            for vname, fn in _variants(map_id):
                g, u = _f32(fx, f"{t}:ffn_gate-{layer}"), _f32(fx, f"{t}:ffn_up-{layer}")
                y = np.zeros_like(g)
                fn(ptr(y), ptr(g), ptr(u), 1, g.size, 0, 1)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _mismatch(y, d[f"{t}:ffn_geglu-{layer}"])
        for map_id in _providers("rmsnorm"):
            for vname, fn in _variants(map_id):
                x = _f32(fx, f"{t}:ffn_out-{layer}")
                y = np.zeros_like(x)
                fn(ptr(y), ptr(x), ptr(w_post), 1, x.size, eps, 0, 1)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _mismatch(
                    y, d[f"{t}:ffn_post_norm-{layer}"])
        for map_id in _providers("residual_add"):
            for vname, fn in _variants(map_id):
                a, b = _f32(fx, f"{t}:ffn_post_norm-{layer}"), _f32(fx, f"{t}:sa_out-{layer}")
                y = np.zeros_like(a)
                fn(ptr(y), ptr(a), ptr(b), 1, a.size, 0, 1)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _mismatch(y, d[f"{t}:l_out-{layer}"])
        for map_id in _providers("residual_add_rmsnorm"):
            for vname, fn in _variants(map_id):
                prev = _f32(fx, f"{t}:inp_scaled") if layer == 0 else None
                if prev is None:
                    continue
                a = _f32(fx, f"{t}:attn_post_norm-{layer}")
                y, h = np.zeros_like(a), np.zeros_like(a)
                fn(ptr(y), ptr(h), ptr(a), ptr(prev), ptr(w_ffn), 1, a.size, eps, 0, 1)
                key = f"{map_id}.{vname}"
                bad[key] = bad.get(key, 0) + _mismatch(y, d[f"{t}:sa_out-{layer}"]) + _mismatch(
                    h, d[f"{t}:ffn_norm-{layer}"])
    assert bad and not any(bad.values()), bad


def test_embedding_and_first_norm_give_llama_outputs(fx, weights):
    d, settings = fx
    raw, wtype = weights["token_embd.weight"]
    dim = d["0:inp_scaled"].size
    vocab = _rows(raw, wtype, dim)
    scale = ctypes.c_float(float(np.sqrt(np.float32(dim))))
    w_attn = np.ascontiguousarray(np.frombuffer(weights["blk.0.attn_norm.weight"][0], np.float32))
    bad = {}
    for t, tok in enumerate(settings["prompt"]):
        for map_id in _providers("embedding", weight=wtype):
            for vname, fn in _variants(map_id):
                y = np.zeros(dim, np.float32)
                ids = np.array([tok], np.int32)
                fn(ptr(y), ptr(raw), ptr(ids), 1, vocab, dim, scale, 0, 1)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _mismatch(y, d[f"{t}:inp_scaled"])
        for map_id in _providers("rmsnorm"):
            for vname, fn in _variants(map_id):
                x = _f32(fx, f"{t}:inp_scaled")
                y = np.zeros_like(x)
                fn(ptr(y), ptr(x), ptr(w_attn), 1, x.size, ctypes.c_float(EPS), 0, 1)
                bad[f"{map_id}.{vname}"] = bad.get(f"{map_id}.{vname}", 0) + _mismatch(y, d[f"{t}:attn_norm-0"])
    assert bad and not any(bad.values()), bad
