"""Every kernel a llama-cpu policy selects, fed llama.cpp's own inputs, must return llama.cpp's own outputs bit for bit.

Fixture: tests/fixtures/llama_ops (make_op_fixtures.py): llama.cpp 0.3.36 built without AMX, flash attention,
f16 KV cache, 1 thread, one token per decode, over 640 tokens of long text; layers 0 and 2 (sliding window)
and 5, 11, 17 (global) at runs of positions 0-3, 254-257 (llama.cpp's KV view grows from 256 to 512 cells at
256), 510-513 (the 512-token window starts dropping keys at 512) and 636-639. Each layer is replayed op by
op from llama.cpp's layer input (and, for the output projection, from its attention output): each op's
output row must hash like llama.cpp's (sha256 of the f32 row), one row per call (decode), the whole run
in one call (prefill, M = 4) and every row of the fixture in one call plus the first GEMM_TAIL again (gemm,
M = 19: the linear kernels' register-blocked GEMM of M >= 16 and its row tail; row-wise ops take rows of
any positions, RoPE one run of consecutive positions per call), through every variant this host runs of
every provider of the policy's contract; the op's output feeds the next op. Variants this host cannot run
are noted for the end-of-run ISA summary line. The fixture's model must be the default model.

Attention runs on llama.cpp's whole K/V caches of the fixture's kv_layers (2: sliding window, 5: global):
policy llama-cpu must give llama.cpp's 1-thread output, llama-cpu-t2 / -t4 what llama.cpp's own flash
attention gives on 2 / 4 threads for the same inputs. The other layers' caches are not in the fixture: every
layer (sliding 0, 2; global 5, 11, 17) runs attention at the positions whose every key the fixture's rows
give (0-3), on a cache our kv_append wrote from llama.cpp's K/V rows, the cells not written yet NaN.
kv_append itself, fed llama.cpp's K rows (normed, roped) and V rows as replayed here (each row checked
against llama.cpp's Kcur_rope / Vcur hash first), must write the fixture's f16 cache cells of the kv_layers
bit for bit at every fixture position. Those cells are llama.cpp's f32 K/V rows rounded to f16 by NumPy in
make_op_fixtures.py (round to nearest even, as llama.cpp's F16C copy into its cache), not bytes read from
llama.cpp's cache tensor.

llama.cpp's arithmetic depends on the CPU it was built for: a second fixture, tests/fixtures/llama_ops_avx2, is the
same run of llama.cpp built without AVX-512 (GGML_AVX512=OFF, made on an AMD Zen 3), whose flash attention adds its
score dot on 8-float lanes. Policy llama-cpu-avx2 must give that build's tensors: the same replay, attention and
kv_append checks on every layer the fixture holds, the embedding, output norm and LM head.
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
from isa_report import note_unchecked
from kernel_harness import bind, gguf_layout, host_arch, host_can_run, host_features, load_map_library, ptr

from kernelmap.gguf import open_gguf
from kernelmap.isa_flags import flags_arch
from kernelmap.maps.registry import load_registry
from kernelmap.numerics.policy import load_policy

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# llama.cpp build -> (fixture folder, the policy that reproduces it); every layer its ops.json lists is replayed
BUILDS = {"avx512": ("llama_ops", "llama-cpu"),
          "avx2": ("llama_ops_avx2", "llama-cpu-avx2")}
POLICY = "llama-cpu"
EPS = ctypes.c_float(1e-6)
DIM, N_HEAD, N_HEAD_KV, HEAD_DIM, FF = 640, 4, 1, 256, 2048
SCALE = ctypes.c_float(1.0 / 16.0)  # 1/sqrt(head_dim), applied to Q ahead of the attention
GLOBAL_LAYERS = (5, 11, 17)  # full attention, RoPE base 1e6; the others: 512-token window, base 1e4
WINDOW = 512
GEMM_TAIL = 3  # gemm mode: the fixture's 16 rows and the first 3 again, M = 19: whole GEMM tiles and a 3-row tail
F16_NAN = 0x7E00  # the cells attention must not read yet


def _rope_base(layer: int) -> float:
    return 1e6 if layer in GLOBAL_LAYERS else 10000.0


@functools.cache
def _doc(build: str) -> dict:
    return json.loads((FIXTURES / BUILDS[build][0] / "ops.json").read_text(encoding="utf-8"))


@functools.cache
def _load(build: str) -> tuple[dict, dict]:
    with np.load(FIXTURES / BUILDS[build][0] / "ops.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, _doc(build)


def _layer_cases(which: str = "layers") -> list:
    """(build, layer) of every layer the build's fixture lists under `which` (layers, or kv_layers: whole caches)."""
    return [pytest.param(build, layer, id=f"{build}-{layer}") for build in BUILDS for layer in _doc(build)[which]]


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
        for v in spec["variants"]:
            if flags_arch(v.get("cflags", ())) not in (None, host_arch()):
                continue  # another architecture's variant: tests/aarch64 runs it under qemu
            if not host_can_run(v["requires"])[0]:
                note_unchecked(f"{map_id}[{v['name']}]", sorted(set(v["requires"]) - host_features()))
                continue
            out.append((f"{map_id}.{v['name']}", gguf_layout(spec, bind(lib, spec, v["name"]))))
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


def _calls(doc: dict, mode: str) -> list[list[int]]:
    """The positions of each call: one (decode), one run (prefill), every fixture row and the first GEMM_TAIL again (gemm)."""
    runs = [list(range(p0, p0 + n)) for p0, n in doc["runs"]]
    if mode == "decode":
        return [[p] for run in runs for p in run]
    if mode == "prefill":
        return runs
    every = [p for run in runs for p in run]
    return [every + every[:GEMM_TAIL]]


def _spans(positions: list[int]) -> list[tuple[int, int, int]]:
    """(first row, rows, first position) of each run of consecutive positions: one RoPE or kv_append call each."""
    out: list[tuple[int, int, int]] = []
    for i, p in enumerate(positions):
        if out and p == out[-1][2] + out[-1][1]:
            out[-1] = (out[-1][0], out[-1][1] + 1, out[-1][2])
        else:
            out.append((i, 1, p))
    return out


def _rope(rp: _Replay, src: np.ndarray, heads: int, norm: str, layer: int, tensor: str, positions: list[int],
          mode: str) -> np.ndarray:
    """qk_norm_rope of Q or K rows (heads of HEAD_DIM) at `positions`, checked against llama.cpp's `tensor`."""
    w = _wf32(rp.gguf, f"blk.{layer}.{norm}.weight")

    def call(fn):
        y = np.zeros_like(src)
        for i, n, p0 in _spans(positions):
            fn(ptr(y[i:i + n]), ptr(src[i:i + n]), ptr(w), n, heads, HEAD_DIM, p0, EPS,
               ctypes.c_float(_rope_base(layer)), ctypes.c_float(1.0), 0, 1)
        return y

    return rp.op("qk_norm_rope", f"{tensor}:{layer}", positions, call, mode, style="neox")


def _attn_norm(rp: _Replay, arrays: dict, layer: int, positions: list[int], mode: str) -> tuple[np.ndarray, np.ndarray]:
    """(llama.cpp's layer input, its attn_norm as replayed and checked) at `positions`, [M, DIM] each."""
    x = np.stack([arrays[f"x:{layer}:{p}"] for p in positions]).astype(np.float32)
    return x, rp.rmsnorm(_wf32(rp.gguf, f"blk.{layer}.attn_norm.weight"), f"attn_norm:{layer}", x, positions, mode)


def _kv_rows(rp: _Replay, h: np.ndarray, layer: int, positions: list[int], mode: str) -> tuple[np.ndarray, np.ndarray]:
    """The K rows (normed, roped) and V rows [M, HEAD_DIM] of attn_norm rows h at `positions`, each checked
    against llama.cpp's Kcur_rope / Vcur hash (so, when rp.bad stays empty, llama.cpp's own rows)."""
    blk = f"blk.{layer}"
    k = rp.linear(f"{blk}.attn_k.weight", f"Kcur:{layer}", h, positions, mode)
    v = rp.linear(f"{blk}.attn_v.weight", f"Vcur:{layer}", h, positions, mode)
    return _rope(rp, k, N_HEAD_KV, "attn_k_norm", layer, "Kcur_rope", positions, mode), v


def _appended(rp: _Replay, which: str, cache: np.ndarray, x: np.ndarray, positions: list[int]) -> dict[str, np.ndarray]:
    """{"provider.variant nth=N": a copy of the f16 cache [Hkv][C][D] (as uint16) after that kv_append variant wrote
    rows x at `positions`} for every kv_append variant of the rule for cache `which` (k or v), on 1 and 2 threads."""
    out = {}
    for name, fn in _variants("kv_append", rp.policy, cache=which):
        for nth in (1, 2):
            got = cache.copy()
            for i, n, p0 in _spans(positions):
                rows = np.ascontiguousarray(x[i:i + n], np.float32)
                for ith in range(nth):
                    fn(ptr(got), ptr(rows), n, N_HEAD_KV, HEAD_DIM, got.shape[1], p0, ith, nth)
            out[f"{name} nth={nth}"] = got
    assert out, f"no kv_append variant for cache {which}"
    return out


def _replay_layer(rp: _Replay, arrays: dict, layer: int, positions: list[int], mode: str) -> None:
    g = rp.gguf
    blk = f"blk.{layer}"
    m = len(positions)
    x, h = _attn_norm(rp, arrays, layer, positions, mode)
    q = rp.linear(f"{blk}.attn_q.weight", f"Qcur:{layer}", h, positions, mode)
    _rope(rp, q, N_HEAD, "attn_q_norm", layer, "Qcur_rope", positions, mode)
    _kv_rows(rp, h, layer, positions, mode)
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


@pytest.mark.parametrize("mode", ["decode", "prefill", "gemm"])
@pytest.mark.parametrize(("build", "layer"), _layer_cases())
def test_layer_ops_llama_inputs_give_llama_outputs(gguf, build, layer, mode):
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    for positions in _calls(doc, mode):
        _replay_layer(rp, arrays, layer, positions, mode)
    assert rp.checked and not rp.bad, _report(rp)


def _attention_cases() -> list:
    """(layer, build, policy, llama.cpp's tensor) for every layer whose whole K/V cache the build's fixture holds."""
    policies = {"avx512": [("llama-cpu", "kqv_out"), ("llama-cpu-t2", "kqv_t2"), ("llama-cpu-t4", "kqv_t4")],
                "avx2": [("llama-cpu-avx2", "kqv_out")]}
    return [pytest.param(layer, build, policy, tensor, id=f"{layer}-{build}-{policy}-{tensor}")
            for layer in sorted({la for b in BUILDS for la in _doc(b)["kv_layers"]}) for build in BUILDS
            if layer in _doc(build)["kv_layers"] for policy, tensor in policies[build]]


def _attend(rp: _Replay, policy: str, tensor: str, h: np.ndarray, kc: np.ndarray, vc: np.ndarray, layer: int,
            positions: list[int], mode: str) -> None:
    """Q of attn_norm rows h (one run of positions), then attention on caches kc, vc [Hkv][C][D] f16 through every
    variant of the policy's attention on 1 and 2 threads, each output checked against llama.cpp's `tensor`."""
    q = rp.linear(f"blk.{layer}.attn_q.weight", f"Qcur:{layer}", h, positions, mode)
    qr = _rope(rp, q, N_HEAD, "attn_q_norm", layer, "Qcur_rope", positions, mode)
    window = 0 if layer in GLOBAL_LAYERS else WINDOW
    for name, fn in _variants("attention", policy):
        for nth in (1, 2):
            y = np.zeros_like(qr)
            for ith in range(nth):
                fn(ptr(y), ptr(qr), ptr(kc), ptr(vc), len(positions), N_HEAD, N_HEAD_KV, HEAD_DIM, kc.shape[1],
                   positions[0], SCALE, window, ith, nth)
            rp.check(f"attention {name} nth={nth} ({mode})", f"{tensor}:{layer}", y, positions)


@pytest.mark.parametrize("mode", ["decode", "prefill"])
@pytest.mark.parametrize(("layer", "build", "policy", "tensor"), _attention_cases())
def test_attention_long_context_gives_llama_outputs(gguf, layer, build, policy, tensor, mode):
    """Attention past llama.cpp's 256-cell view step and its 512-token window, on a sliding and a global layer."""
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    kc = np.ascontiguousarray(arrays[f"k:{layer}"][None])  # [Hkv][C][D] f16
    vc = np.ascontiguousarray(arrays[f"v:{layer}"][None])
    for positions in _calls(doc, mode):
        _attend(rp, policy, tensor, _attn_norm(rp, arrays, layer, positions, mode)[1], kc, vc, layer, positions, mode)
    assert rp.checked and not rp.bad, f"policy {policy}: " + _report(rp)


def _prefix(doc: dict) -> set[int]:
    """The positions 0 .. p - 1 whose every key (position <= p) is a fixture row: all a layer without a whole cache
    in the fixture can attend from."""
    have = {p0 + i for p0, n in doc["runs"] for i in range(n)}
    return {p for p in range(len(doc["tokens"])) if all(j in have for j in range(p + 1))}


@pytest.mark.parametrize("mode", ["decode", "prefill"])
@pytest.mark.parametrize(("build", "layer"), _layer_cases())
def test_attention_on_appended_cache_gives_llama_outputs(gguf, build, layer, mode):
    """Every layer's attention (sliding 0, 2; global 5, 11, 17) at positions 0-3, on the f16 caches kv_append
    writes from llama.cpp's K/V rows (every kv_append variant must write the same bytes); cells not yet written
    are NaN, so a kernel reading past its position fails."""
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    shape = (N_HEAD_KV, len(doc["tokens"]), HEAD_DIM)
    caches = {"k": np.full(shape, F16_NAN, np.uint16), "v": np.full(shape, F16_NAN, np.uint16)}
    prefix = _prefix(doc)
    calls = [positions for positions in _calls(doc, mode) if set(positions) <= prefix]
    assert calls, f"{BUILDS[build][0]}: no run from position 0"
    for positions in calls:
        h = _attn_norm(rp, arrays, layer, positions, mode)[1]
        for which, rows in zip("kv", _kv_rows(rp, h, layer, positions, mode), strict=True):
            out = _appended(rp, which, caches[which], rows, positions)
            caches[which] = next(iter(out.values()))
            differ = [name for name, got in out.items() if not np.array_equal(got, caches[which])]
            assert not differ, f"cache {which} at {positions}: kv_append variants {differ} differ from {next(iter(out))}"
        _attend(rp, rp.policy, "kqv_out", h, caches["k"], caches["v"], layer, positions, mode)
    assert rp.checked and not rp.bad, _report(rp)


@pytest.mark.parametrize("mode", ["decode", "prefill"])
@pytest.mark.parametrize(("build", "layer"), _layer_cases("kv_layers"))
def test_kv_append_llama_k_v_rows_give_llama_cache_cells(gguf, build, layer, mode):
    """kv_append (every variant of the policy's providers, ref included, on 1 and 2 threads), fed llama.cpp's K rows
    (normed, roped) and V rows, writes the fixture's f16 cache cells bit for bit at every fixture position and
    leaves every other cell alone."""
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    shape = (N_HEAD_KV, len(doc["tokens"]), HEAD_DIM)
    blank = np.full(shape, F16_NAN, np.uint16)
    bad = []
    for positions in _calls(doc, mode):
        h = _attn_norm(rp, arrays, layer, positions, mode)[1]
        for which, rows in zip("kv", _kv_rows(rp, h, layer, positions, mode), strict=True):
            want = arrays[f"{which}:{layer}"].view(np.uint16)[positions]
            for name, got in _appended(rp, which, blank, rows, positions).items():
                cells = got[0, positions]
                miss = np.argwhere(cells != want)
                if len(miss):
                    first = [(positions[i], int(d), hex(want[i, d]), hex(cells[i, d])) for i, d in miss[:3]]
                    bad.append(f"kv_append {name} ({mode}) {which}:{layer}: {len(miss)} values differ, first "
                               f"(position, d, expected, got) {first}")
                rest = np.delete(got[0], positions, axis=0)
                if not (rest == F16_NAN).all():
                    bad.append(f"kv_append {name} ({mode}) {which}:{layer}: wrote cells outside {positions}")
    assert rp.checked and not rp.bad, "the replayed K/V rows are not llama.cpp's: " + _report(rp)
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("mode", ["decode", "prefill", "gemm"])
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_embedding_output_norm_and_lm_head_give_llama_outputs(gguf, build, mode):
    arrays, doc = _load(build)
    rp = _Replay(doc, gguf, BUILDS[build][1])
    raw, wtype = _w(gguf, "token_embd.weight")
    vocab = _rows_of(raw, wtype, DIM)
    scale = ctypes.c_float(float(np.sqrt(np.float32(DIM))))
    for positions in _calls(doc, mode):
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
