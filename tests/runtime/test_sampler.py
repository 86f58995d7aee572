"""Sampler: greedy is argmax with lowest-id ties, seeds reproduce, filters restrict the support."""

import numpy as np
import pytest

from kernelmap.errors import ModelError
from kernelmap.runtime.sampler import Sampler, SamplerConfig


def test_sampler_greedy_breaks_ties_to_lowest_id():
    logits = np.array([0.0, 3.0, 1.0, 3.0], dtype=np.float32)
    assert Sampler(SamplerConfig()).sample(logits) == 1


def test_sampler_same_seed_same_tokens():
    logits = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    cfg = SamplerConfig(temperature=1.0, top_k=50, top_p=0.9, seed=7)
    a, b = Sampler(cfg), Sampler(cfg)
    assert [a.sample(logits) for _ in range(20)] == [b.sample(logits) for _ in range(20)]


def test_sampler_top_k_one_is_greedy():
    logits = np.random.default_rng(1).standard_normal(500).astype(np.float32)
    s = Sampler(SamplerConfig(temperature=2.0, top_k=1, seed=3))
    assert all(s.sample(logits) == int(np.argmax(logits)) for _ in range(10))


def test_sampler_min_p_excludes_unlikely_tokens():
    logits = np.array([10.0, 9.9, -10.0, -10.0], dtype=np.float32)
    s = Sampler(SamplerConfig(temperature=1.0, top_k=0, min_p=0.5, seed=0))
    assert {s.sample(logits) for _ in range(50)} <= {0, 1}


def test_sampler_repeat_penalty_changes_greedy_choice():
    logits = np.array([2.0, 1.9, 0.0], dtype=np.float32)
    s = Sampler(SamplerConfig(repeat_penalty=1.5))
    assert s.sample(logits, history=[0]) == 1
    assert logits[0] == 2.0  # the caller's buffer is not modified


@pytest.mark.parametrize("field,value", [("temperature", -1.0), ("top_p", 0.0), ("min_p", 1.0), ("top_k", -1), ("seed", -1),
                                         ("seed", 1 << 64)])
def test_sampler_refuses_out_of_range_options(field, value):
    with pytest.raises(ModelError, match="out of range"):
        Sampler(SamplerConfig(**{field: value}))
