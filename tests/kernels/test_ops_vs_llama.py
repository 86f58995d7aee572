"""Every kernel a llama-cpu policy selects, fed llama.cpp's own inputs, must return llama.cpp's own outputs bit for bit.

Fixture: tests/fixtures/llama_ops (make_op_fixtures.py): llama.cpp 0.3.36 built without AMX, flash attention,
f16 KV cache, 1 thread, one token per decode, over 640 tokens of long text; layers 0 and 2 (sliding window)
and 5, 11, 17 (global) at runs of positions 0-3, 254-257 (llama.cpp's KV view grows from 256 to 512 cells at
256), 510-513 (the 512-token window starts dropping keys at 512) and 636-639. Each layer is replayed op by
op from llama.cpp's layer input (and, for the output projection, from its attention output): each op's
output row must hash like llama.cpp's (sha256 of the f32 row), one row per call (decode) and the whole run
in one call (prefill, M = 4), through every variant this host runs of every provider of the policy's
contract; the op's output feeds the next op. Attention runs on llama.cpp's whole K/V caches of layers 2
and 5: policy llama-cpu must give llama.cpp's 1-thread output, llama-cpu-t2 / -t4 what llama.cpp's own
flash attention gives on 2 / 4 threads for the same inputs. The fixture's model must be the default model.

llama.cpp's arithmetic depends on the CPU it was built for: a second fixture, tests/fixtures/llama_ops_avx2, is the
same run of llama.cpp built without AVX-512 (GGML_AVX512=OFF, made on an AMD Zen 3), whose flash attention adds its
score dot on 8-float lanes. Policy llama-cpu-avx2 must give that build's tensors: the same replay on a sliding and
a global layer (0, 5), the attention of layers 2 and 5, the embedding, output norm and LM head.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from kernel_harness import bind, gguf_layout, host_can_run, load_map_library, ptr

from kernelmap.gguf import open_gguf
from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# llama.cpp build -> (fixture folder, the policy that reproduces it, the layers replayed op by op)
BUILDS = {"avx512": ("llama_ops", "llama-cpu", (0, 2, 5, 11, 17)),
          "avx2": ("llama_ops_avx2", "llama-cpu-avx2", (0, 5))}
POLICY = "llama-cpu"
EPS = ctypes.c_float(1e-6)
DIM, N_HEAD, N_HEAD_KV, HEAD_DIM, FF = 640, 4, 1, 256, 2048
SCALE = ctypes.c_float(1.0 / 16.0)  # 1/sqrt(head_dim), applied to Q ahead of the attention
GLOBAL_LAYERS = (5, 11, 17)  # full attention, RoPE base 1e6; the others: 512-token window, base 1e4
WINDOW = 512


def _rope_base(layer: int) -> float:
    return 1e6 if layer in GLOBAL_LAYERS else 10000.0


@functools.cache
def _load(build: str) -> tuple[dict, dict]:
    folder = FIXTURES / BUILDS[build][0]
    doc = json.loads((folder / "ops.json").read_text(encoding="utf-8"))
    with np.load(folder / "ops.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, doc


def _layer_cases() -> list:
    return [pytest.param(build, layer, id=f"{build}-{layer}") for build, (_d, _p, layers) in BUILDS.items()
            for layer in layers]


@pytest.fixture(scope="module")
def gguf():
    from kernelmap.runtime import default_model_path

    g = open_gguf(default_model_path())
    yield g
    g.close()


def _w(gguf, name: str) -> tuple[np.ndarray, str]:
    return gguf.tensor_data(name), gguf.tensors[name].type_name


def _wf32(gguf, name: str) -> np.ndarray:
    return np.ascontiguousarray(np.frombuffer(_w(gguf, name)[0], np.float32))


def _sha(row: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(row, "<f4").tobytes()).hexdigest()


@functools.cache
def _registry():
    return load_registry()


@functools.cache
def _policy(name: str):
    return load_policy(name)


def _providers(op: str, policy: str = POLICY, **keys: str) -> list[str]:
    contract = _policy(policy).rule_for(op, **keys).contract
    # batch row wrappers (maps with `calls`) share the contract but take per-row positions and KV slots:
    # test_batch_rows.py checks them against one call of these providers per row
    ids = [p.id for p in _registry().by_op(op)
           if p.contract == contract and p.status == "production" and not p.raw.get("calls")]
    assert ids, f"no production provider implements {contract}"
    return ids


@functools.cache
def _bound(op: str, policy: str, keys: tuple[tuple[str, str], ...]) -> tuple[tuple[str, Callable[..., None]], ...]:
    out = []
    for map_id in _providers(op, policy, **dict(keys)):
        lib, spec = load_map_library(map_id)
        out += [(f"{map_id}.{v['name']}", gguf_layout(spec, bind(lib, spec, v["name"]))) for v in spec["variants"]
                if host_can_run(v["requires"])[0]]
    return tuple(out)


def _variants(op: str, policy: str = POLICY, **keys: str) -> Iterator[tuple[str, Callable[..., None]]]:
    """(provider.variant, bound function) of every variant this host runs, of every provider of the contract."""
    yield from _bound(op, policy, tuple(sorted(keys.items())))


def _rows_of(raw: np.ndarray, wtype: str, k: int) -> int:
    block = {"q8_0": (32, 34), "q5_0": (32, 22), "q4_k": (256, 144), "q6_k": (256, 210)}[wtype]
    return raw.size // (k // block[0] * block[1])


class _Replay:
    """Replays ops on groups of rows (positions) and records every output row whose hash is not llama.cpp's."""

    def __init__(self, doc: dict, gguf, policy: str = POLICY) -> None:
        self.want: dict[str, str] = doc["sha256"]
        self.gguf = gguf
        self.policy = policy
        self.bad: dict[str, list[str]] = {}
        self.checked = 0

    def check(self, label: str, tensor: str, y: np.ndarray, positions: list[int]) -> None:
        for row, p in zip(y.reshape(len(positions), -1), positions, strict=True):
            key = f"{tensor}:{p}"
            self.checked += 1
            if _sha(row) != self.want[key]:
                self.bad.setdefault(label, []).append(key)

    def op(self, op: str, tensor: str, positions: list[int], call: Callable[[Callable[..., None]], np.ndarray],
           mode: str, **keys: str) -> np.ndarray:
        """Run `call(fn)` through every variant; check each output; return the first variant's output."""
        first = None
        for name, fn in _variants(op, self.policy, **keys):
            y = call(fn)
            self.check(f"{op} {name} ({mode})", tensor, y, positions)
            first = y if first is None else first
        assert first is not None
        return first

    def quantize(self, act: str, x: np.ndarray) -> np.ndarray:
        m, k = x.shape
        fn = next(fn for name, fn in _variants("quantize_act", self.policy, activation=act) if name.endswith(".ref"))
        y = np.zeros(m * {"q8_0": k // 32 * 34, "q8_k": k // 256 * 292}[act], np.uint8)
        fn(ptr(y), ptr(np.ascontiguousarray(x, np.float32)), m, k, 0, 1)
        return y

    def linear(self, name: str, tensor: str, x: np.ndarray, positions: list[int], mode: str) -> np.ndarray:
        raw, wtype = _w(self.gguf, name)
        rule = _policy(self.policy).rule_for("linear", weight=wtype)
        xq = self.quantize(rule.activation, x)
        m, k = x.shape
        n = _rows_of(raw, wtype, k)

        def call(fn):
            y = np.zeros((m, n), np.float32)
            fn(ptr(y), ptr(raw), ptr(xq), m, n, k, 0, 1)
            return y

        return self.op("linear", tensor, positions, call, mode, weight=wtype)

    def rmsnorm(self, w: np.ndarray, tensor: str, x: np.ndarray, positions: list[int], mode: str) -> np.ndarray:
        def call(fn):
            y = np.zeros_like(x)
            fn(ptr(y), ptr(x), ptr(w), x.shape[0], x.shape[1], EPS, 0, 1)
            return y

        return self.op("rmsnorm", tensor, positions, call, mode)


def _groups(run: tuple[int, int], mode: str) -> list[list[int]]:
    p0, n = run
    positions = list(range(p0, p0 + n))
    return [positions] if mode == "prefill" else [[p] for p in positions]


def _replay_layer(rp: _Replay, arrays: dict, layer: int, positions: list[int], mode: str) -> None:
    g = rp.gguf
    blk = f"blk.{layer}"
    x = np.stack([arrays[f"x:{layer}:{p}"] for p in positions]).astype(np.float32)
    m = len(positions)
    h = rp.rmsnorm(_wf32(g, f"{blk}.attn_norm.weight"), f"attn_norm:{layer}", x, positions, mode)
    q = rp.linear(f"{blk}.attn_q.weight", f"Qcur:{layer}", h, positions, mode)
    k = rp.linear(f"{blk}.attn_k.weight", f"Kcur:{layer}", h, positions, mode)
    rp.linear(f"{blk}.attn_v.weight", f"Vcur:{layer}", h, positions, mode)
    for src, heads, norm, tensor in [(q, N_HEAD, "attn_q_norm", "Qcur_rope"), (k, N_HEAD_KV, "attn_k_norm", "Kcur_rope")]:
        w = _wf32(g, f"{blk}.{norm}.weight")

        def call(fn, src=src, heads=heads, w=w):
            y = np.zeros_like(src)
            fn(ptr(y), ptr(src), ptr(w), m, heads, HEAD_DIM, positions[0], EPS, ctypes.c_float(_rope_base(layer)),
               ctypes.c_float(1.0), 0, 1)
            return y

        rp.op("qk_norm_rope", f"{tensor}:{layer}", positions, call, mode, style="neox")
    kqv = np.stack([arrays[f"kqv:{layer}:{p}"] for p in positions]).astype(np.float32)
    o = _linear_unchecked(rp, f"{blk}.attn_output.weight", kqv)
    a = rp.rmsnorm(_wf32(g, f"{blk}.post_attention_norm.weight"), f"attn_post_norm:{layer}", o, positions, mode)
    w_ffn = _wf32(g, f"{blk}.ffn_norm.weight")
    sa = {}

    def add_norm(fn):
        y, hh = np.zeros_like(a), np.zeros_like(a)
        fn(ptr(y), ptr(hh), ptr(a), ptr(x), ptr(w_ffn), m, DIM, EPS, 0, 1)
        sa.setdefault("out", (y, hh))
        rp.check(f"residual_add_rmsnorm (sa_out, {mode})", f"sa_out:{layer}", y, positions)
        return hh

    hf = rp.op("residual_add_rmsnorm", f"ffn_norm:{layer}", positions, add_norm, mode)
    sa_out = sa["out"][0]
    gate = rp.linear(f"{blk}.ffn_gate.weight", f"ffn_gate:{layer}", hf, positions, mode)
    up = rp.linear(f"{blk}.ffn_up.weight", f"ffn_up:{layer}", hf, positions, mode)

    def geglu(fn):
        y = np.zeros_like(gate)
        fn(ptr(y), ptr(gate), ptr(up), m, FF, 0, 1)
        return y

    gg = rp.op("geglu", f"ffn_geglu:{layer}", positions, geglu, mode)
    down = rp.linear(f"{blk}.ffn_down.weight", f"ffn_out:{layer}", gg, positions, mode)
    post = rp.rmsnorm(_wf32(g, f"{blk}.post_ffw_norm.weight"), f"ffn_post_norm:{layer}", down, positions, mode)

    def residual(fn):
        y = np.zeros_like(post)
        fn(ptr(y), ptr(post), ptr(sa_out), m, DIM, 0, 1)
        return y

    rp.op("residual_add", f"l_out:{layer}", positions, residual, mode)


def _linear_unchecked(rp: _Replay, name: str, x: np.ndarray) -> np.ndarray:
    """attn_output has no llama.cpp tensor of its own in the fixture: its output is checked through the norm."""
    raw, wtype = _w(rp.gguf, name)
    xq = rp.quantize(_policy(rp.policy).rule_for("linear", weight=wtype).activation, x)
    m, k = x.shape
    n = _rows_of(raw, wtype, k)
    outs = []
    for _name, fn in _variants("linear", rp.policy, weight=wtype):
        y = np.zeros((m, n), np.float32)
        fn(ptr(y), ptr(raw), ptr(xq), m, n, k, 0, 1)
        outs.append(y)
    assert all(np.array_equal(outs[0], y) for y in outs[1:]), f"{name}: linear variants disagree"
    return outs[0]


def _report(rp: _Replay) -> str:
    return "; ".join(f"{label}: {len(keys)} rows differ, first {keys[:3]}" for label, keys in sorted(rp.bad.items()))


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_ops_fixture_is_the_default_model_and_a_build_without_amx(build, gguf):
    doc = _load(build)[1]
    assert doc["model"]["sha256"] == gguf.sha256(), f"{BUILDS[build][0]}/ops.json: made with {doc['model']}"
    assert doc["peer"]["n_threads"] == 1 and doc["peer"]["flash_attn"] and doc["peer"]["n_batch"] == 1, doc["peer"]
    assert "AMX" not in doc["peer"]["system_info"] and doc["peer"]["llama_cpp_python"] == "0.3.36", doc["peer"]
    # the build the fixture claims: AVX512 in llama.cpp's system_info exactly for the AVX-512 build
    assert ("AVX512 = 1" in doc["peer"]["system_info"]) == (build == "avx512"), doc["peer"]["system_info"]


@pytest.mark.parametrize("mode", ["decode", "prefill"])
@pytest.mark.parametrize(("build", "layer"), _layer_cases())
def test_layer_ops_llama_inputs_give_llama_outputs(gguf, build, layer, mode):
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    for run in doc["runs"]:
        for positions in _groups(tuple(run), mode):
            _replay_layer(rp, arrays, layer, positions, mode)
    assert rp.checked and not rp.bad, _report(rp)


@pytest.mark.parametrize("mode", ["decode", "prefill"])
@pytest.mark.parametrize(("build", "policy", "tensor"), [("avx512", "llama-cpu", "kqv_out"),
                                                          ("avx512", "llama-cpu-t2", "kqv_t2"),
                                                          ("avx512", "llama-cpu-t4", "kqv_t4"),
                                                          ("avx2", "llama-cpu-avx2", "kqv_out")])
@pytest.mark.parametrize("layer", [2, 5])
def test_attention_long_context_gives_llama_outputs(gguf, layer, build, policy, tensor, mode):
    """Attention past llama.cpp's 256-cell view step and its 512-token window, on a sliding and a global layer."""
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    kc = np.ascontiguousarray(arrays[f"k:{layer}"][None])  # [Hkv][C][D] f16
    vc = np.ascontiguousarray(arrays[f"v:{layer}"][None])
    c = kc.shape[1]
    window = 0 if layer in GLOBAL_LAYERS else WINDOW
    qn = _wf32(gguf, f"blk.{layer}.attn_q_norm.weight")
    for run in doc["runs"]:
        for positions in _groups(tuple(run), mode):
            m = len(positions)
            x = np.stack([arrays[f"x:{layer}:{p}"] for p in positions]).astype(np.float32)
            h = rp.rmsnorm(_wf32(gguf, f"blk.{layer}.attn_norm.weight"), f"attn_norm:{layer}", x, positions, mode)
            q = rp.linear(f"blk.{layer}.attn_q.weight", f"Qcur:{layer}", h, positions, mode)

            def rope(fn, q=q, m=m, p0=positions[0]):
                y = np.zeros_like(q)
                fn(ptr(y), ptr(q), ptr(qn), m, N_HEAD, HEAD_DIM, p0, EPS, ctypes.c_float(_rope_base(layer)),
                   ctypes.c_float(1.0), 0, 1)
                return y

            qr = rp.op("qk_norm_rope", f"Qcur_rope:{layer}", positions, rope, mode, style="neox")
            for name, fn in _variants("attention", policy):
                for nth in (1, 2):
                    y = np.zeros_like(qr)
                    for ith in range(nth):
                        fn(ptr(y), ptr(qr), ptr(kc), ptr(vc), m, N_HEAD, N_HEAD_KV, HEAD_DIM, c, positions[0], SCALE,
                           window, ith, nth)
                    rp.check(f"attention {name} nth={nth} ({mode})", f"{tensor}:{layer}", y, positions)
    assert rp.checked and not rp.bad, f"policy {policy}: " + _report(rp)


@pytest.mark.parametrize("mode", ["decode", "prefill"])
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_embedding_output_norm_and_lm_head_give_llama_outputs(gguf, build, mode):
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    raw, wtype = _w(gguf, "token_embd.weight")
    vocab = _rows_of(raw, wtype, DIM)
    scale = ctypes.c_float(float(np.sqrt(np.float32(DIM))))
    for run in doc["runs"]:
        for positions in _groups(tuple(run), mode):
            m = len(positions)
            ids = np.array([doc["tokens"][p] for p in positions], np.int32)

            def embed(fn, ids=ids, m=m):
                y = np.zeros((m, DIM), np.float32)
                fn(ptr(y), ptr(raw), ptr(ids), m, vocab, DIM, scale, 0, 1)
                return y

            rp.op("embedding", "inp_scaled", positions, embed, mode, weight=wtype)
            final = np.stack([arrays[f"final:{p}"] for p in positions]).astype(np.float32)
            h = rp.rmsnorm(_wf32(gguf, "output_norm.weight"), "result_norm", final, positions, mode)
            rp.linear("token_embd.weight", "logits", h, positions, mode)
    assert rp.checked and not rp.bad, _report(rp)


@pytest.mark.parametrize(("build", "other"), [("avx512", "llama-cpu-avx2"), ("avx2", "llama-cpu")])
def test_attention_of_one_build_is_not_the_other_builds(gguf, build, other):
    """The two llama.cpp builds' attentions differ, so each policy's test above can fail: the other build's
    policy misses most of this build's kqv_out rows (layer 2, decode)."""
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    kc = np.ascontiguousarray(arrays["k:2"][None])
    vc = np.ascontiguousarray(arrays["v:2"][None])
    fn = next(fn for name, fn in _variants("attention", other) if name.endswith(".ref"))
    positions = [p for run in doc["runs"] for p in range(run[0], run[0] + run[1]) if p > 0]
    for p in positions:  # llama.cpp's own roped Q is not in the fixture: recompute it as the replay does
        x = arrays[f"x:2:{p}"][None].astype(np.float32)
        h = rp.rmsnorm(_wf32(gguf, "blk.2.attn_norm.weight"), "attn_norm:2", x, [p], "decode")
        q = rp.linear("blk.2.attn_q.weight", "Qcur:2", h, [p], "decode")
        qr = np.zeros_like(q)
        rope = next(fn for name, fn in _variants("qk_norm_rope", rp.policy, style="neox") if name.endswith(".ref"))
        rope(ptr(qr), ptr(q), ptr(_wf32(gguf, "blk.2.attn_q_norm.weight")), 1, N_HEAD, HEAD_DIM, p, EPS,
             ctypes.c_float(_rope_base(2)), ctypes.c_float(1.0), 0, 1)
        y = np.zeros_like(qr)
        fn(ptr(y), ptr(qr), ptr(kc), ptr(vc), 1, N_HEAD, N_HEAD_KV, HEAD_DIM, kc.shape[1], p, SCALE, WINDOW, 0, 1)
        rp.check("attention", "kqv_out:2", y, [p])
    assert set(rp.bad) <= {"attention"}, _report(rp)  # the inputs are the build's own
    assert len(rp.bad.get("attention", [])) >= len(positions) // 2, _report(rp)
