"""Barrier groups and split ops: a barrier is dropped only between ops that touch disjoint memory; only ops
streaming a large weight without scratch run as claimed pieces."""

from types import SimpleNamespace

from kernelmap.circuits.graph import Graph, OpNode, Tensor
from kernelmap.codegen.emit import PhasePlan, barrier_groups

_REGISTRY = SimpleNamespace(providers={"p": SimpleNamespace(scratch=[])})


def _op(label, inputs, outputs, state=None):
    return OpNode(label=label, cname=label, op="x", layer=0, interface="i", inputs=inputs, outputs=outputs,
                  state=state or {}, provider="p", variant="v")


def _plan(ops, offsets):
    tensors = {n: Tensor(n, "f32", (1, 16)) for n in offsets}  # 64 bytes each
    return PhasePlan(Graph("decode", 1, ops, tensors, {}, {}, {}), offsets)


def test_barrier_groups_projections_sharing_one_input_run_without_barriers():
    ops = [_op("q", {"x": "h"}, {"y": "tq"}), _op("k", {"x": "h"}, {"y": "tk"}), _op("v", {"x": "h"}, {"y": "tv"})]
    assert barrier_groups(_plan(ops, {"h": 0, "tq": 64, "tk": 128, "tv": 192}), _REGISTRY) == [[0, 1, 2]]


def test_barrier_groups_reader_of_a_group_output_starts_a_new_group():
    ops = [_op("q", {"x": "h"}, {"y": "tq"}), _op("k", {"x": "h"}, {"y": "tk"}), _op("rope", {"x": "tk"}, {"y": "r"})]
    assert barrier_groups(_plan(ops, {"h": 0, "tq": 64, "tk": 128, "r": 192}), _REGISTRY) == [[0, 1], [2]]


def test_barrier_groups_output_aliasing_a_dead_input_keeps_the_barrier():
    # the planner may place b's output where a's input was (a is its last reader): not independent
    ops = [_op("a", {"x": "h"}, {"y": "ta"}), _op("b", {"x": "g"}, {"y": "tb"})]
    assert barrier_groups(_plan(ops, {"h": 0, "ta": 64, "g": 128, "tb": 32}), _REGISTRY) == [[0], [1]]


def test_barrier_groups_ops_sharing_a_state_buffer_keep_the_barrier():
    ops = [_op("append", {"x": "k"}, {}, {"cache": "s_k"}), _op("attn", {"q": "q"}, {"y": "o"}, {"k": "s_k"})]
    assert barrier_groups(_plan(ops, {"k": 0, "q": 64, "o": 128}), _REGISTRY) == [[0], [1]]


def test_barrier_groups_unplanned_buffer_keeps_the_barrier():
    ops = [_op("a", {"x": "h"}, {"y": "ta"}), _op("b", {"x": "h"}, {"y": "missing"})]
    plan = _plan(ops, {"h": 0, "ta": 64})
    plan.graph.tensors["missing"] = Tensor("missing", "f32", (1, 16))
    assert barrier_groups(plan, _REGISTRY) == [[0], [1]]


def test_barrier_groups_scratch_counts_as_written():
    reg = SimpleNamespace(providers={"p": SimpleNamespace(scratch=[SimpleNamespace(name="s", max_bytes=lambda d: 64)])})
    ops = [_op("a", {"x": "h"}, {"y": "ta"}), _op("b", {"x": "h"}, {"y": "tb"})]
    # b's scratch lies on a's output
    plan = _plan(ops, {"h": 0, "ta": 64, "tb": 128, "a__scratch_s": 192, "b__scratch_s": 64})
    assert barrier_groups(plan, reg) == [[0], [1]]


def test_split_ops_picks_large_weight_ops_without_scratch_only():
    from kernelmap.circuits.graph import WeightRef
    from kernelmap.codegen.emit import SPLIT_MIN_BYTES, SPLIT_PIECES, split_ops

    rows = SPLIT_MIN_BYTES // (640 * 4) + 1  # f32 rows of 640: just above the threshold
    big = WeightRef("w_big", "big.weight", "f32", (rows, 640))
    small = WeightRef("w_small", "small.weight", "f32", (8, 640))
    reg = SimpleNamespace(providers={"p": SimpleNamespace(scratch=[]), "s": SimpleNamespace(scratch=[object()])})
    ops = [_op("head", {"x": "h"}, {"y": "a"}), _op("proj", {"x": "h"}, {"y": "b"}), _op("scr", {"x": "h"}, {"y": "c"})]
    ops[0].weights, ops[1].weights, ops[2].weights = {"w": big}, {"w": small}, {"w": big}
    ops[2].provider = "s"
    assert split_ops(_plan(ops, {"h": 0, "a": 64, "b": 128, "c": 192}), reg) == {0: SPLIT_PIECES}


def test_split_ops_in_a_prefill_phase_also_split_gemms_in_whole_panels():
    from kernelmap.circuits.graph import WeightRef
    from kernelmap.codegen.emit import (
        SPLIT_GEMM_COLS,
        SPLIT_GEMM_COLS_NARROW,
        SPLIT_GEMM_MIN_BYTES,
        SPLIT_GEMM_MIN_PIECES,
        SPLIT_MIN_ROWS,
        SPLIT_PIECES,
        split_ops,
    )

    gemm = WeightRef("w", "ffn.weight", "f32", (2048, SPLIT_GEMM_MIN_BYTES // (2048 * 4) + 1))  # just above
    narrow = WeightRef("w", "v.weight", "f32", (64, SPLIT_GEMM_MIN_BYTES // (64 * 4) + 1))  # fewer rows than a panel
    tiny = WeightRef("w", "k.weight", "f32", (256, 64))
    # 640 rows: 5 pieces of SPLIT_GEMM_COLS would leave one of 2 threads 3 of them; pieces of the narrow width
    down = WeightRef("w", "down.weight", "f32", (640, SPLIT_GEMM_MIN_BYTES // (640 * 4) + 1))
    reg = SimpleNamespace(providers={"p": SimpleNamespace(scratch=[])})
    ops = [_op(n, {"x": "h"}, {"y": t}) for n, t in (("ffn", "a"), ("v", "b"), ("k", "c"), ("down", "d"))]
    ops[0].weights, ops[1].weights, ops[2].weights, ops[3].weights = {"w": gemm}, {"w": narrow}, {"w": tiny}, {"w": down}
    plan = _plan(ops, {"h": 0, "a": 64, "b": 128, "c": 192, "d": 256})
    assert split_ops(plan, reg) == {}  # a decode phase (1 row): these are below its GEMV threshold
    plan.graph.max_rows = SPLIT_MIN_ROWS
    assert 640 // SPLIT_GEMM_COLS < SPLIT_GEMM_MIN_PIECES <= 2048 // SPLIT_GEMM_COLS
    assert split_ops(plan, reg) == {0: 2048 // SPLIT_GEMM_COLS, 1: 2, 3: 640 // SPLIT_GEMM_COLS_NARROW}
    assert 2048 // SPLIT_GEMM_COLS < SPLIT_PIECES


def test_split_ops_in_a_decode_phase_split_large_gemvs_in_pieces_of_rows():
    from kernelmap.circuits.graph import WeightRef
    from kernelmap.codegen.emit import SPLIT_GEMV_COLS, SPLIT_GEMV_MIN_BYTES, split_ops

    ffn = WeightRef("w", "ffn.weight", "f32", (2048, SPLIT_GEMV_MIN_BYTES // (2048 * 4) + 1))
    small = WeightRef("w", "q.weight", "f32", (2048, SPLIT_GEMV_MIN_BYTES // (2048 * 4) - 1))
    reg = SimpleNamespace(providers={"p": SimpleNamespace(scratch=[])})
    ops = [_op("ffn", {"x": "h"}, {"y": "a"}), _op("q", {"x": "h"}, {"y": "b"})]
    ops[0].weights, ops[1].weights = {"w": ffn}, {"w": small}
    assert split_ops(_plan(ops, {"h": 0, "a": 64, "b": 128}), reg) == {0: 2048 // SPLIT_GEMV_COLS}
