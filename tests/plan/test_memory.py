"""Memory planner: live buffers never overlap, dead ones share memory, plans are deterministic."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelmap.plan.memory import ALIGN, Buffer, plan_memory


def _overlap(a, b):
    return not (a.last < b.first or b.last < a.first)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=40))
def test_plan_memory_never_overlaps_live_buffers(specs):
    bufs = [Buffer(f"b{i}", size, first, first + span) for i, (size, first, span) in enumerate(specs)]
    plan = plan_memory(bufs)
    for a in bufs:
        assert plan.offsets[a.name] % ALIGN == 0
        assert plan.offsets[a.name] + a.size <= plan.size
        for b in bufs:
            if a.name < b.name and _overlap(a, b):
                ra = (plan.offsets[a.name], plan.offsets[a.name] + a.size)
                rb = (plan.offsets[b.name], plan.offsets[b.name] + b.size)
                assert ra[1] <= rb[0] or rb[1] <= ra[0], (a, b, plan.offsets)
    assert plan.size <= plan.naive_size


def test_plan_memory_reuses_dead_buffers():
    chain = [Buffer(f"t{i}", 1024, i, i + 1) for i in range(10)]
    plan = plan_memory(chain)
    assert plan.size == 2 * 1024
    assert plan.naive_size == 10 * 1024
    assert "saved 80.0%" in plan.summary()


def test_plan_memory_is_independent_of_input_order():
    bufs = [Buffer(f"t{i}", 64 * (i % 5 + 1), i % 7, i % 7 + i % 3) for i in range(30)]
    shuffled = bufs[:]
    random.Random(1).shuffle(shuffled)
    assert plan_memory(bufs) == plan_memory(shuffled)
