"""Every ISA level the host can run compiles the same model to bit-identical logits (scalar, AVX2, host best).

The contracts say a SIMD variant computes its scalar ref's bits, so programs built for lower ISA
levels must agree with the host's best build bit for bit. A small synthetic Gemma-3-shaped model
(6 layers, one global-attention layer, sliding window 8) carries the default policy's linear weight
types (q4_k, q6_k, q5_0, q8_0, q4_0, q4_1, q5_1 in llama.cpp's order, f32; the legacy nibble types run their
repacked-layout providers) and is compiled once per level with the KERNELMAP_ISA override; the prompt's prefill
logits and six decode steps after it must equal the scalar build's. The 45-token prompt runs as prefill batches of
32 and 13 rows (max_rows 32): the first takes the int8 prefill GEMMs (16 rows and more: q_k_gemm_body.h,
q32_gemm_body.h on panels unpacked from the repacked layout), the second the row-at-a-time loops. `make test` runs scalar, avx2 and the host's best;
`make test-slow` adds the plain avx512 level (on an AVX512-VNNI host the best build uses the vnni
variants instead). A level the target cannot run is skipped, and the end-of-run ISA line
(tests/conftest.py) names it.
"""

from __future__ import annotations

import numpy as np
import pytest
from isa_report import note_unchecked
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.maps.registry import load_registry
from kernelmap.runtime.model import Model
from kernelmap.target import ISA_ENV, LEVELS, parse_isa, target_features

LEVEL_PARAMS = ["scalar", "avx2", pytest.param("avx512", marks=pytest.mark.slow), "host"]
PROMPT = [2, *range(270, 290), 300, 301, 302, 303, *range(250, 270)]  # 45 tokens: batches of 32 and 13 rows
DECODE = [280, 281, 282, 283, 284, 285]
# the default policy's linear weight types, each in several layers and positions
WEIGHT_TYPES = {"attn_q": "q4_k", "attn_k": "q5_0", "attn_v": "q6_k", "attn_output": "q8_0", "ffn_gate": "q4_k",
                "ffn_up": "q5_0", "ffn_down": "q6_k", "blk.1.attn_output": "q4_k", "blk.2.ffn_up": "f32",
                "blk.3.ffn_gate": "q8_0", "blk.4.attn_k": "q6_k", "blk.5.attn_q": "f32", "blk.2.attn_v": "q4_0",
                "blk.3.ffn_up": "q4_1", "blk.4.ffn_down": "q5_1"}

# the default policy's linear kernels the weights above must reach (the legacy nibble types in every phase: the
# repacked layout's providers)
LINEAR_PROVIDERS = {"linear_f32_f32_ggml",
                    "linear_q5_0_q8_0_ggml_r8", "linear_q4_0_q8_0_ggml_r8", "linear_q4_1_q8_1_ggml_r8",
                    "linear_q5_1_q8_1_ggml_r8"}
# q8_0, q4_K and q6_K: the 16-row layouts' providers where they have a variant for the level (AVX-512 VNNI; on the scalar
# level both providers run only their refs and priority picks them), the GGUF layout's elsewhere
C16_LEVELS = {"scalar": True, "avx2": False, "avx512": False, "avx512vnni": True}
C16_TYPES = ("q8_0_q8_0", "q4_k_q8_k", "q6_k_q8_k")


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("isa_levels")
    path = write_synth_model(d / "mixed.gguf", n_layers=6, d=256, n_heads=2, n_kv=1, head_dim=128, ffn=512,
                             weight_type="q8_0", weight_types=WEIGHT_TYPES)
    return {"gguf": path, "dir": d, "builds": {}}


def _features(level: str, monkeypatch) -> frozenset[str]:
    """The target features of `level` as KERNELMAP_ISA=<level> gives them; skip if the target lacks them."""
    available = target_features()  # honours a KERNELMAP_ISA the user already set
    if level == "host":
        return available
    lacking = sorted(parse_isa(level) - available)
    if lacking:
        note_unchecked(f"compiled model [isa {level}]", lacking)
        pytest.skip(f"compiled model [isa {level}]: host lacks {', '.join(lacking)}")
    with monkeypatch.context() as mp:
        mp.setenv(ISA_ENV, level)
        return target_features()


def _build(synth, level: str, monkeypatch):
    if level not in synth["builds"]:
        isa = _features(level, monkeypatch)
        compiled = compile_model(synth["gguf"], CompileOptions(max_rows=32, isa=isa),
                                 out_dir=synth["dir"] / f"build_{level}")
        synth["builds"][level] = (isa, compiled)
    return synth["builds"][level]


def _logits(compiled) -> np.ndarray:
    """[prompt's last-row prefill logits, then each decode step's] as one array (threads=2)."""
    m = Model(compiled, n_ctx=64, threads=2)
    try:
        rows = [m.logits(PROMPT)]
        rows += [m.decode(tok).copy() for tok in DECODE]
    finally:
        m.close()
    return np.stack(rows)


def _selected(compiled) -> dict[str, str]:
    """{phase:op label: variant name} of the build."""
    return {f"{phase}:{label}": variant for phase, label, _provider, variant, _symbol in compiled.info["selection"]}


@pytest.mark.parametrize("level", LEVEL_PARAMS)
def test_isa_level_build_uses_that_levels_variants(synth, level, monkeypatch):
    """The scalar build runs only ref variants, the AVX2 build only avx2 ones, and so on: the levels really
    compile different programs, and no build uses a variant its ISA lacks."""
    registry = load_registry()
    isa, compiled = _build(synth, level, monkeypatch)
    variants = set()
    for phase, label, provider, variant, _symbol in compiled.info["selection"]:
        requires = registry.providers[provider].variant(variant).requires
        assert requires <= isa, f"isa {level}: {phase}:{label} uses {provider}[{variant}] needing {sorted(requires - isa)}"
        variants.add(variant)
    if level == "scalar":
        assert variants == {"ref"}
    elif level == "avx2":
        assert variants == {"avx2"}
    elif level == "avx512":
        assert "avx512" in variants and variants <= {"avx512", "avx2"}
    elif LEVELS["avx512vnni"] <= isa and "bmi2" in isa:
        assert "avx512vnni" in variants
    providers = {row[2] for row in compiled.info["selection"]}
    assert LINEAR_PROVIDERS <= providers, f"isa {level}: the model no longer reaches {sorted(LINEAR_PROVIDERS - providers)}"
    c16 = C16_LEVELS.get(level, LEVELS["avx512vnni"] <= isa or not LEVELS["avx2"] <= isa)
    for t in C16_TYPES:
        want = f"linear_{t}_ggml_c16" if c16 else f"linear_{t}_ggml"
        assert want in providers, f"isa {level}: {t} linears not on {want}: {sorted(p for p in providers if t in p)}"
    assert any(label.startswith("blk.5.") for _, label, *_ in compiled.info["selection"])


@pytest.mark.parametrize("level", LEVEL_PARAMS[1:])
def test_isa_level_logits_bit_identical_to_scalar(synth, level, monkeypatch):
    _, scalar = _build(synth, "scalar", monkeypatch)
    _, built = _build(synth, level, monkeypatch)
    if level != "host":
        assert _selected(built) != _selected(scalar), f"isa {level} selected the scalar program"
    want, got = _logits(scalar), _logits(built)
    assert np.all(np.isfinite(want)) and float(np.std(want[0])) > 0, "degenerate logits from the synthetic model"
    bad = np.argwhere(want.view(np.uint32) != got.view(np.uint32))
    assert bad.size == 0, (f"isa {level} vs scalar: {len(bad)} of {want.size} logits differ; first at step "
                           f"{bad[0][0]} vocab {bad[0][1]}: {want[tuple(bad[0])]!r} vs {got[tuple(bad[0])]!r}; "
                           f"max abs error {float(np.max(np.abs(want - got)))}")
