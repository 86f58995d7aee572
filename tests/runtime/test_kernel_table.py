"""The boot-time kernel table: a plan selecting a kernel the library does not export is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelmap.build.driver import KERNEL_ROOT, CompileUnit, build_shared
from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import ModelError
from kernelmap.maps.registry import load_registry
from kernelmap.resolve import SelectionTrace
from kernelmap.runtime.kernel_table import (
    Selected,
    _runnable_units,
    available_kernels,
    check_build,
    check_library,
    selection_from_trace,
)
from kernelmap.target import target_features

CALLER = """
#include <stdint.h>
void km_residual_add_f32__ref(float *, const float *, const float *, int64_t, int64_t, int, int);
void km_rmsnorm_f32__ref(float *, const float *, const float *, int64_t, int64_t, float, int, int);
void km_toy_step(float *y, const float *a, const float *b, const float *w, int64_t n) {
    km_residual_add_f32__ref(y, a, b, 1, n, 0, 1);
    km_rmsnorm_f32__ref(y, y, w, 1, n, 1e-6f, 0, 1);
}
"""
SELECTION = [
    Selected("decode", "blk.0.attn_residual", "residual_add_f32", "ref", "km_residual_add_f32__ref"),
    Selected("decode", "blk.0.ffn_norm", "rmsnorm_f32", "ref", "km_rmsnorm_f32__ref"),
]


def _toy_library(tmp_path: Path, *, with_rmsnorm: bool) -> Path:
    caller = tmp_path / "toy_model.c"
    caller.write_text(CALLER)
    units = [CompileUnit(caller), CompileUnit(KERNEL_ROOT / "residual/add_f32_ref.c")]
    if with_rmsnorm:
        units.append(CompileUnit(KERNEL_ROOT / "rmsnorm/f32_ref.c"))
    return build_shared(units, name="toymodel")


def test_check_library_refuses_plan_whose_kernel_unit_was_left_out(tmp_path):
    lib = _toy_library(tmp_path, with_rmsnorm=False)  # links: a shared object may leave symbols undefined
    with pytest.raises(ModelError) as info:
        check_library(lib, SELECTION)
    msg = str(info.value)
    assert "the plan selects rmsnorm_f32::km_rmsnorm_f32__ref for decode:blk.0.ffn_norm, which this library " \
           "does not export" in msg
    assert info.value.path == str(lib)
    assert info.value.value == "km_rmsnorm_f32__ref"


def test_check_library_complete_library_gives_table_of_every_selected_kernel(tmp_path):
    lib = _toy_library(tmp_path, with_rmsnorm=True)
    table = check_library(lib, SELECTION)
    assert dict(table.handles) == {"km_residual_add_f32__ref": ("residual_add_f32", "ref"),
                                   "km_rmsnorm_f32__ref": ("rmsnorm_f32", "ref")}
    assert table.handle("rmsnorm_f32", "km_rmsnorm_f32__ref") == ("rmsnorm_f32", "ref")
    with pytest.raises(ModelError, match="the plan selects rope_neox_f32::km_rope_neox_f32__ref"):
        table.handle("rope_neox_f32", "km_rope_neox_f32__ref")


def test_selection_from_trace_reads_phase_op_and_selected_symbol(tmp_path):
    trace = SelectionTrace([
        {"label": "decode:blk.0.ffn_norm", "request": {"op": "rmsnorm", "phase": "decode"}, "rows": [], "error": None,
         "selected": {"provider": "rmsnorm_f32", "variant": "avx2", "symbol": "km_rmsnorm_f32__avx2"}},
        {"label": "decode:blk.0.attn", "request": {"op": "attention", "phase": "decode"}, "rows": [],
         "selected": None, "error": "no provider"},
    ])
    path = trace.write(tmp_path / "selection_trace.json")
    assert selection_from_trace(path) == [
        Selected("decode", "blk.0.ffn_norm", "rmsnorm_f32", "avx2", "km_rmsnorm_f32__avx2")]


def test_probe_library_units_hold_the_best_runnable_variant_of_every_map():
    registry = load_registry()
    isa = target_features()
    units, absent = _runnable_units(registry, isa, None)
    built = {u.source.relative_to(KERNEL_ROOT).as_posix() for u in units}
    for provider in registry.providers.values():
        runnable = [v for v in provider.ranked_variants if set(v.requires) <= isa and v.source not in absent]
        if runnable:
            assert runnable[0].source in built, f"{provider.id}::{runnable[0].name} missing from the probe library"
            assert not any(v.source in built for v in runnable[1:]), f"{provider.id}: more than one variant"
    scalar, _ = _runnable_units(registry, frozenset(), None)
    assert "fused/residual_add_rmsnorm_f32_ref.c" in {u.source.relative_to(KERNEL_ROOT).as_posix() for u in scalar}


def test_available_kernels_probe_finds_exported_variants_only(tmp_path):
    registry = load_registry()
    lib = _toy_library(tmp_path, with_rmsnorm=False)
    found = available_kernels(registry, target_features(), library=lib)
    assert ("residual_add_f32", "ref", "km_residual_add_f32__ref") in found.kernels
    assert not found.has_map("rmsnorm_f32")
    assert "rmsnorm_f32" in found.known


def test_check_library_refuses_synthetic_model_library_missing_one_kernel_unit(tmp_path):
    """Relink a compiled synthetic model's kernel library without its rmsnorm unit: boot refuses it
    before any token."""
    from synth_model import write_synth_model

    from kernelmap.build.kernel_lib import kernel_library_units
    from kernelmap.maps.registry import load_registry

    gguf = write_synth_model(tmp_path / "synth.gguf")
    built = compile_model(gguf, CompileOptions(max_rows=8, allow_candidates=True), out_dir=tmp_path / "build")
    selection = selection_from_trace(built.build_dir / "selection_trace.json")
    assert check_build(built.build_dir, built.kernel_library).handles  # the real build passes
    held = [tuple(p) for p in built.info["kernel_library_variants"]]
    kept = [p for p in held if p[0] != "rmsnorm_f32"]
    assert len(kept) == len(held) - 1
    # Same ISA target as the compile, so every object is the compile's own (cached) object: only the
    # link is new.
    broken = build_shared(kernel_library_units(load_registry(()), kept), name="kmkernels_broken",
                          link_flags=["-lpthread"], target=",".join(built.info["isa"]))
    with pytest.raises(ModelError) as info:
        check_library(broken, selection)
    first_norm = next(s for s in selection if s.map_id == "rmsnorm_f32")
    assert (f"the plan selects rmsnorm_f32::{first_norm.symbol} for {first_norm.phase}:{first_norm.op}, "
            "which this library does not export") in str(info.value)


def test_check_build_without_trace_is_refused(tmp_path):
    with pytest.raises(ModelError, match="the build has no selection trace"):
        check_build(tmp_path, tmp_path / "lib.so")


@pytest.mark.parametrize(("entry", "want"), [
    (Selected("decode", "blk.0.ffn_norm", "rmsnorm_f32", "avx2", "km_rmsnorm_f32__ref"), "km_rmsnorm_f32__avx2"),
    (Selected("decode", "blk.0.ffn_norm", "residual_add_f32", "ref", "km_rmsnorm_f32__ref"),
     "km_residual_add_f32__ref"),
])
def test_check_library_refuses_selection_whose_map_and_variant_disagree_with_the_symbol(tmp_path, entry, want):
    """Issue 11 item 4: the library exports the symbol, but it is not the selected map's variant."""
    lib = _toy_library(tmp_path, with_rmsnorm=True)
    with pytest.raises(ModelError) as info:
        check_library(lib, [SELECTION[0], entry])
    assert f"the plan selects {entry.map_id}::{entry.variant} for decode:blk.0.ffn_norm with symbol " \
           f"km_rmsnorm_f32__ref, which is not that map's variant" in info.value.line()
    assert info.value.expected == want and info.value.pointer == "decode:blk.0.ffn_norm"
