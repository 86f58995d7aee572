"""Fused vs unfused programs: logits bit-identical (the fused contracts say so), and the plans really differ.

The unfused build is CompileOptions(fusion=False); the fused one is the default (fusion=True), which
applies `fuse_for_target` (rules of the target's class, a probe of every kernel they name) before and
after scheduling. Each comparison first checks that the unfused plan holds no fused op and the fused
plan does, so the two programs are different programs and equal logits mean something.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from synth_model import write_synth_model

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.maps.registry import load_registry
from kernelmap.plan.fuse import load_rules
from kernelmap.resolve import SelectionTrace
from kernelmap.runtime.kernel_table import check_library, selection_from_trace
from kernelmap.runtime.model import Model
from kernelmap.target import host_class, target_features

PROMPT = [2, 270, 271, 272, 273, 274, 275, 276, 277, 300, 301, 302]


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("fusion_synth")
    return {"f32": write_synth_model(d / "f32.gguf"), "q8_0": write_synth_model(d / "q8.gguf", weight_type="q8_0"),
            "dir": d}


def _fused_ops(built, isa: frozenset[str]) -> dict[str, list[str]]:
    """{phase: labels of ops whose provider implements a fused op of the target class's rules}."""
    registry = load_registry()
    fused = {r.fused_op for r in load_rules(host_class(isa))}
    out: dict[str, list[str]] = {"prefill": [], "decode": []}
    for phase, label, provider, _variant, _symbol in built.info["selection"]:
        if registry.providers[provider].op in fused:
            out[phase].append(label)
    return out


def _applied(built) -> set[str]:
    records = SelectionTrace.load(built.build_dir / "selection_trace.json").fusions
    return {r["rule"] for r in records if r["decision"] == "applied"}


def _assert_plans_differ(plain, fused, isa: frozenset[str]) -> None:
    assert plain.info["fusion"] is False and fused.info["fusion"] is True
    assert _applied(plain) == set(), "the unfused build applied fusion rules"
    assert _fused_ops(plain, isa) == {"prefill": [], "decode": []}, "the unfused plan holds fused ops"
    for phase in ("prefill", "decode"):
        assert _fused_ops(fused, isa)[phase], f"the fused plan holds no fused op in {phase}"
        assert len(fused.info["ops"][phase]) < len(plain.info["ops"][phase])


def _logits(compiled) -> np.ndarray:
    """Prefill logits of the whole prompt and the logits of every decode step after a 5-token prefill."""
    m = Model(compiled, n_ctx=64, threads=2)
    try:
        rows = [m.logits(PROMPT).copy()]
        m.reset()
        m.prefill(PROMPT[:5])
        rows += [m.decode(tok).copy() for tok in PROMPT[5:]]
    finally:
        m.close()
    return np.stack(rows)


@pytest.mark.parametrize("weights, isa_name", [("f32", "scalar"), ("q8_0", "target")])
def test_fused_program_logits_bit_identical_to_unfused(synth, weights, isa_name):
    out = synth["dir"] / f"build_{weights}_{isa_name}"
    isa = frozenset() if isa_name == "scalar" else target_features()
    options = CompileOptions(max_rows=8, isa=isa, fusion=False)
    plain = compile_model(synth[weights], options, out_dir=out / "plain")
    fused = compile_model(synth[weights], dataclasses.replace(options, fusion=True), out_dir=out / "fused")
    # the norms feed Q8_0 projections (q8_0 weights), and with any weights the last ffn residual feeds the final
    # norm, which feeds the Q8_0 LM head (the tied token_embd; both last-row ops): the scheduled-stage rule applies
    expected = {"residual_add_rmsnorm", "qk_norm_rope_neox", "residual_add_rmsnorm_quantize_q8_0_rne"}
    if weights == "q8_0":  # the GEGLU product feeds the Q8_0 down projection's quantizer only
        expected.add("geglu_quantize_q8_0_rne")
    assert _applied(fused) == expected
    _assert_plans_differ(plain, fused, isa)
    assert any(op.startswith("blk.0.attn_residual") for op in fused.info["ops"]["decode"])
    for built in (plain, fused):
        check_library(built.kernel_library, selection_from_trace(built.build_dir / "selection_trace.json"))
    want, got = _logits(plain), _logits(fused)
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32)), (
        f"fused logits differ: max abs error {float(np.max(np.abs(want - got)))}")


def test_default_compile_options_fuse(synth):
    """CompileOptions() fuses: the default build is the fused plan."""
    isa = frozenset()
    default = compile_model(synth["f32"], CompileOptions(max_rows=8, isa=isa), out_dir=synth["dir"] / "default")
    plain = compile_model(synth["f32"], CompileOptions(max_rows=8, isa=isa, fusion=False),
                          out_dir=synth["dir"] / "default_plain")
    _assert_plans_differ(plain, default, isa)


@pytest.mark.model
@pytest.mark.slow
def test_real_model_fused_logits_bit_identical_to_unfused(tmp_path, model_path):
    isa = target_features()
    plain = compile_model(model_path, CompileOptions(isa=isa, fusion=False), out_dir=tmp_path / "plain")
    fused = compile_model(model_path, CompileOptions(isa=isa, fusion=True), out_dir=tmp_path / "fused")
    _assert_plans_differ(plain, fused, isa)
    prompt = [2, 651, 6037, 529, 7001, 563]
    got = []
    for built in (plain, fused):
        m = Model(built, n_ctx=64, threads=2)
        try:
            rows = [m.logits(prompt).copy()]
            rows += [m.decode(tok).copy() for tok in (1000, 2000, 3000)]
            got.append(np.stack(rows))
        finally:
            m.close()
    assert np.array_equal(got[0].view(np.uint32), got[1].view(np.uint32))
