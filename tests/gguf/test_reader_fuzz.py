"""Hypothesis fuzzing of the GGUF reader: >= 10,000 mutated images, only GGUFError may escape, no hangs."""

from __future__ import annotations

import signal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelmap.gguf.fuzz import INTERESTING_U32, INTERESTING_U64, exercise, mutate, seed_images

SEEDS = seed_images()
_POS = st.integers(0, 1 << 12)
_OP = st.one_of(
    st.tuples(st.just("flip"), _POS, st.integers(1, 255)),
    st.tuples(st.just("cut"), _POS),
    st.tuples(st.just("u64"), _POS, st.sampled_from(INTERESTING_U64)),
    st.tuples(st.just("u32"), _POS, st.sampled_from(INTERESTING_U32)),
    st.tuples(st.just("insert"), _POS, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), _POS, st.integers(1, 16)),
)
N_EXAMPLES = 10_000


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("one input took more than 5 s")


def test_reader_fuzz_mutations_raise_only_gguf_error():
    seen = {"n": 0, "opened": 0}

    @settings(max_examples=N_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, len(SEEDS) - 1), ops=st.lists(_OP, min_size=1, max_size=4))
    def run(seed, ops):
        seen["n"] += 1
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(5)
        try:
            seen["opened"] += exercise(mutate(SEEDS[seed], ops))
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

    run()
    assert seen["n"] >= N_EXAMPLES
    assert 0 < seen["opened"] < seen["n"]


def test_reader_fuzz_seed_images_open():
    assert all(exercise(image) for image in SEEDS)
