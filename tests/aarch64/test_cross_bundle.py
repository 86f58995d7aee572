"""Cross builds: `kernelmap compile --target aarch64[,dotprod]` bundles, built with the cross gcc and run under qemu.

A whole model compiled for aarch64 (NEON/SDOT instantiations where a map has them, the ref elsewhere)
must give the x86 build's prompt logits bit for bit and the same greedy tokens: the contracts fix the
arithmetic order on every architecture. `make test` checks it on a tiny synthetic model (q8_0
projections, so the dotprod instantiations run); the default Gemma 3 model is the slow version
(`make test-slow`). The generated start-up check refuses a CPU without a selected variant's
features: a dotprod bundle under `qemu-aarch64 -cpu cortex-a53` (Armv8.0, no dotprod) exits 1 with
one line naming asimddp.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.runtime.model import Model

PROMPT = [2, 270, 271, 272, 273, 274, 275, 276, 277, 300, 301, 302]
GEMMA_PROMPT = [2, 818, 5279, 529, 7001, 563]   # "<bos>The capital of France is"
# 24 tokens: over the 16 rows at which the linears switch from row loops to the prefill GEMM (KQ32G_MIN_M), so the
# ARM GEMM instantiations run on the real model too (ids of ordinary words; the bits, not the text, are checked)
GEMMA_LONG_PROMPT = GEMMA_PROMPT + [1000 + 37 * i for i in range(18)]
GEMMA_KERNELS = 13  # distinct kernels the Gemma 3 aarch64,dotprod bundle selects (README: "every one of the 13")
N_TOKENS = 8
_EM_AARCH64 = 183


def _cross_bundle(gguf: Path, out: Path, target: str, batch: int, extra: list[str] | None = None) -> Path:
    """`kernelmap compile --target` (the CLI, as a user runs it), then `make model` with the Makefile's
    default compiler (no $CC: the bundle names the cross gcc itself)."""
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    proc = subprocess.run([sys.executable, "-m", "kernelmap", "compile", "-m", str(gguf), "--target", target,
                           "--batch", str(batch), "-o", str(out), *(extra or [])], capture_output=True, text=True, env=env,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"target {target}:" in proc.stderr
    make = subprocess.run(["make", "-s", "-j2", "-C", str(out), "model"], capture_output=True, text=True, env=env,
                          timeout=1800)
    assert make.returncode == 0, make.stdout[-2000:] + make.stderr[-3000:]
    header = (out / "model").read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == _EM_AARCH64
    return out


def _qemu(toolchain, bundle: Path, cpu: str, args: list[str], tokens: list[int], timeout: float = 1800):
    return subprocess.run([toolchain.qemu, "-L", str(toolchain.sysroot), "-cpu", cpu, "./model", "-t", "2",
                           "-c", "64", *args], input=" ".join(map(str, tokens)), capture_output=True, text=True,
                          cwd=bundle, timeout=timeout)


def _assert_same_as_x86(toolchain, bundle: Path, x86: Model, prompt: list[int]) -> None:
    """Prompt logits (IEEE bits) and the first N_TOKENS greedy tokens of the aarch64 bundle under qemu
    -cpu max equal the x86 build's."""
    want = x86.logits(prompt).astype(np.float32).view(np.uint32)
    x86.reset()
    want_tokens = list(x86.stream(prompt, N_TOKENS))
    x86.reset()
    proc = _qemu(toolchain, bundle, "max", ["--logits-hex"], prompt)
    assert proc.returncode == 0, proc.stderr
    got = np.array([int(h, 16) for h in proc.stdout.split()], dtype=np.uint32)
    assert got.shape == want.shape
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} of {want.size} prompt logits differ from x86; first at {bad[:6].tolist()}: "
                           f"x86 {want[bad[:6]].view(np.float32).tolist()} aarch64 {got[bad[:6]].view(np.float32).tolist()}")
    proc = _qemu(toolchain, bundle, "max", ["-n", str(N_TOKENS)], prompt)
    assert proc.returncode == 0, proc.stderr
    assert [int(t) for t in proc.stdout.split()] == want_tokens


def _selected(bundle: Path) -> dict[str, str]:
    info = json.loads((bundle / "build.json").read_text())
    return {f"{p}:{v}": s for _phase, _label, p, v, s in info["selection"]}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return write_synth_model(tmp_path_factory.mktemp("synth") / "q8.gguf", weight_type="q8_0")


@pytest.fixture(scope="module")
def synth_dotprod(toolchain, synth, tmp_path_factory):
    return _cross_bundle(synth, tmp_path_factory.mktemp("arm") / "bundle", "aarch64,dotprod", 8)


def test_cross_bundle_synth_model_aarch64_dotprod_equals_x86_logits_bits_and_tokens(toolchain, synth, synth_dotprod):
    info = json.loads((synth_dotprod / "build.json").read_text())
    # what -march=armv8.2-a+dotprod lets gcc use (isa_flags: Armv8.1's atomics, crc32, rdm too), all tested at start-up
    assert info["features"] == ["asimd", "asimddp", "asimdrdm", "atomics", "crc32", "fp"]
    assert info["library"] == ""  # nothing built for the host: the bundle's make compiles the aarch64 code
    assert "linear_q8_0_q8_0_ggml:dotprod" in _selected(synth_dotprod)
    assert all(s.endswith(("__ref", "__neon", "__dotprod")) for s in _selected(synth_dotprod).values())
    with Model(compile_model(synth, CompileOptions(max_rows=8)), n_ctx=64, threads=2) as x86:
        assert any(v != "ref" for _, _, _, v, _ in x86.compiled.info["selection"])  # x86 SIMD variants ran
        _assert_same_as_x86(toolchain, synth_dotprod, x86, PROMPT)


# Every position, every layer type, several thread counts: a 6-layer model of Gemma 3's architecture (layers 0-4
# sliding-window with window 8, layer 5 global), a projection type per matrix (K-quants, legacy quants, q8_0), a
# 40-token prompt run as a 32-row GEMM chunk and an 8-row one, then 200 greedy steps to position 239: the
# sliding layers' 39-cell ring (window + 32 rows - 1) wraps six times.
LONG_TYPES = {"attn_q": "q4_k", "attn_k": "q8_0", "attn_v": "q6_k", "attn_output": "q5_0", "ffn_gate": "q4_0",
              "ffn_up": "q5_1", "ffn_down": "q4_1", "blk.5.ffn_down": "q6_k", "blk.5.attn_q": "q8_0"}
LONG_PROMPT = [2] + [6 + (i * 37) % 314 for i in range(39)]
LONG_STEPS = 200
LONG_CTX = 256  # the synthetic model's trained context


def _steps(lines: str) -> tuple[list[int], np.ndarray]:
    """--steps-hex output: per position the greedy id and the logits' IEEE bits."""
    rows = [line.split() for line in lines.splitlines()]
    return [int(r[0]) for r in rows], np.array([[int(h, 16) for h in r[1:]] for r in rows], dtype=np.uint32)


@pytest.fixture(scope="module")
def long_x86(tmp_path_factory):
    """Per policy, the x86 build's greedy ids and logits bits at every position (the prompt's last, then each
    decode step), computed once."""
    gguf = write_synth_model(tmp_path_factory.mktemp("long") / "mixed.gguf", n_layers=6, d=256, n_heads=4, n_kv=1,
                             head_dim=64, ffn=512, weight_types=LONG_TYPES, seed=3)
    runs: dict[str, tuple[list[int], np.ndarray]] = {}

    def run(policy: str) -> tuple[Path, list[int], np.ndarray]:
        if policy not in runs:
            with Model(compile_model(gguf, CompileOptions(policy=policy, max_rows=32)), n_ctx=LONG_CTX,
                       threads=2) as x86:
                # K and V caches per layer: five sliding layers with 39-cell rings, one global layer's full context
                assert [(s["ring"], s["window"]) for s in x86.info["state"]] == [(39, 8)] * 10 + [(0, 0)] * 2
                ids, bits = [], []
                logits = x86.prefill(LONG_PROMPT)
                for step in range(LONG_STEPS):
                    bits.append(np.asarray(logits, dtype=np.float32).view(np.uint32).copy())
                    ids.append(int(np.argmax(logits)))
                    if step + 1 < LONG_STEPS:
                        logits = x86.decode(ids[-1])
            runs[policy] = ids, np.stack(bits)
        return gguf, *runs[policy]

    return run


@pytest.mark.parametrize("target, cpu, policy", [("aarch64,dotprod", "max", "llama-cpu"),
                                                 ("aarch64", "cortex-a53", "llama-cpu"),
                                                 ("aarch64,dotprod", "max", "llama-cpu-kvq8")])
def test_cross_bundle_every_position_and_layer_type_equals_x86_bits_on_1_2_3_threads(toolchain, long_x86, target,
                                                                                     cpu, policy, tmp_path):
    """The claim "same bits on every CPU" at the scale the parity claims are tested: every decode position of a
    240-position run through wrapping sliding-window rings and a global layer, prefill through the GEMM and the
    row loops, seven weight types, the NEON and the SDOT instantiations, f16 and (-ctk/-ctv q8_0's policy) q8_0
    KV caches, 1, 2 and 3 threads."""
    gguf, want_ids, want = long_x86(policy)
    bundle = _cross_bundle(gguf, tmp_path / "arm", target, 32, ["--policy", policy])
    selected = _selected(bundle)
    assert sum(sym.endswith(("__neon", "__dotprod")) for sym in selected.values()) >= 10, selected
    if policy == "llama-cpu-kvq8":
        assert any(k.startswith("attention_q8_0kv") and k.endswith(":dotprod") for k in selected), sorted(selected)
    for threads in (1, 2, 3):
        proc = subprocess.run([toolchain.qemu, "-L", str(toolchain.sysroot), "-cpu", cpu, "./model", "-t",
                               str(threads), "-c", str(LONG_CTX), "-n", str(LONG_STEPS), "--steps-hex"],
                              input=" ".join(map(str, LONG_PROMPT)), capture_output=True, text=True, cwd=bundle,
                              timeout=1800)
        assert proc.returncode == 0, proc.stderr
        ids, got = _steps(proc.stdout)
        assert got.shape == want.shape, (threads, got.shape)
        bad = np.argwhere(got != want)
        assert bad.size == 0, (f"{target} {policy}, {threads} threads: {len(bad)} logits differ from x86; first at "
                               f"(step, id) {bad[:4].tolist()}")
        assert ids == want_ids


FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "families"


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "phi3", "qwen3moe", "llama-d192"])
def test_cross_bundle_family_aarch64_gives_llama_cpp_x86_logits_bits(toolchain, arch, tmp_path):
    """Every family's Q4_K_M fixture (q4_K / q6_K / q5_0 / q8_0 linears, each family's own ops) built for
    aarch64,dotprod gives, under qemu on 2 threads, llama.cpp's x86 logits bit for bit after the prompt and after
    each of the 32 greedy steps: the product-space matrix's bits on another architecture."""
    from kernelmap.families.matrix import load_fixtures, model_path

    fixtures = load_fixtures(FAMILIES)
    gguf = model_path(fixtures, arch, "Q4_K_M", tmp_path)
    peer = np.load(FAMILIES / "peer" / f"{arch}-Q4_K_M.npz")
    prompt = [int(t) for t in fixtures["models"][arch]["prompt"]]
    tokens = [int(t) for t in peer["tokens"]]
    want = np.asarray(peer["logits"], np.float32).view(np.uint32)[len(prompt) - 1:]  # after the prompt, each step
    bundle = _cross_bundle(gguf, tmp_path / "arm", "aarch64,dotprod", 16)
    simd = sorted(k for k, sym in _selected(bundle).items() if sym.endswith(("__neon", "__dotprod")))
    assert any(k.endswith(":dotprod") for k in simd) and len(simd) >= 6, simd
    proc = subprocess.run([toolchain.qemu, "-L", str(toolchain.sysroot), "-cpu", "max", "./model", "-t", "2", "-c",
                           "64", "-n", str(len(want)), "--steps-hex"], input=" ".join(map(str, prompt)),
                          capture_output=True, text=True, cwd=bundle, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    ids, got = _steps(proc.stdout)
    assert got.shape == want.shape, got.shape
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{arch}: {len(bad)} logits differ from llama.cpp's; first at (step, id) {bad[:4].tolist()}"
    assert ids[:-1] == tokens[len(prompt):]


def test_cross_bundle_dotprod_build_refuses_a_cpu_without_dotprod_in_one_line(toolchain, synth_dotprod):
    proc = _qemu(toolchain, synth_dotprod, "cortex-a53", ["-n", "2"], PROMPT, timeout=300)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert lines == ["error: weights.bin: this model was compiled for a CPU with asimddp, which this CPU does not have"]
    assert proc.stdout == ""


def test_cross_bundle_neon_build_runs_on_armv8_0_and_matches_dotprod_build(toolchain, synth, synth_dotprod,
                                                                           tmp_path):
    """The armv8-a target selects the neon instantiations, runs on a Cortex-A53 and gives the dotprod
    build's logits bits."""
    neon = _cross_bundle(synth, tmp_path / "neon", "aarch64", 8)
    assert "linear_q8_0_q8_0_ggml:neon" in _selected(neon)
    a = _qemu(toolchain, neon, "cortex-a53", ["--logits-hex"], PROMPT)
    b = _qemu(toolchain, synth_dotprod, "max", ["--logits-hex"], PROMPT)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout


def test_cross_bundle_model_c_refuses_to_build_for_the_wrong_architecture(synth_dotprod):
    proc = subprocess.run(["gcc", "-std=c11", "-fsyntax-only", "-I.", "model.c"], cwd=synth_dotprod,
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "this model was generated for aarch64 (its kernels need asimd, asimddp," in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KERNELMAP_SLOW"), reason="slow (the default model cross-built and run "
                    "under qemu, several minutes): set KERNELMAP_SLOW=1 (make test-slow); the synthetic-model test is the "
                    "fast version")
def test_cross_bundle_default_model_aarch64_equals_x86_prompt_logits_bits_and_8_greedy_tokens(toolchain, tmp_path):
    from kernelmap.runtime import default_model_path

    gguf = default_model_path()
    bundle = _cross_bundle(gguf, tmp_path / "gemma", "aarch64,dotprod", 128)
    selected = _selected(bundle)
    assert "linear_q5_0_q8_0_ggml:dotprod" in selected and "linear_q8_0_q8_0_ggml:dotprod" in selected
    # the README's claim: every kernel the bundle selects (decode and prefill) is a NEON / SDOT instantiation
    refs = sorted(k for k, sym in selected.items() if not sym.endswith(("__neon", "__dotprod")))
    assert not refs, f"kernels of the Gemma aarch64,dotprod bundle that are not NEON / SDOT: {refs}"
    assert len(selected) == GEMMA_KERNELS, sorted(selected)
    with Model(compile_model(gguf, CompileOptions()), n_ctx=64, threads=2) as x86:
        _assert_same_as_x86(toolchain, bundle, x86, GEMMA_PROMPT)
        x86.reset()
        _assert_same_as_x86(toolchain, bundle, x86, GEMMA_LONG_PROMPT)
