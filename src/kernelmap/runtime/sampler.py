"""Sampling: logits of one position -> the next token id, greedy or seeded-random.

Applies, in llama.cpp's usual order, repeat penalty over the recent window, then top-k, temperature,
top-p and min-p, then draws from the remaining distribution with a seeded NumPy generator, so a seed
reproduces a run exactly. Temperature 0 is greedy (argmax, ties to the lowest id). It does not run the
model and never changes the logits buffer it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kernelmap.errors import ModelError

__all__ = ["SamplerConfig", "Sampler"]


@dataclass(frozen=True)
class SamplerConfig:
    """Sampling knobs; the defaults are greedy decoding."""

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 1.0
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: int = 0

    def check(self) -> SamplerConfig:
        """Refuse values outside their ranges."""
        bad = [(n, v, e) for n, v, ok, e in (
            ("--temp", self.temperature, self.temperature >= 0, ">= 0"),
            ("--top-k", self.top_k, self.top_k >= 0, ">= 0 (0 = off)"),
            ("--top-p", self.top_p, 0 < self.top_p <= 1, "in (0, 1]"),
            ("--min-p", self.min_p, 0 <= self.min_p < 1, "in [0, 1)"),
            ("--repeat-penalty", self.repeat_penalty, self.repeat_penalty > 0, "> 0"),
            ("--repeat-last-n", self.repeat_last_n, self.repeat_last_n >= 0, ">= 0"),
            ("--seed", self.seed, isinstance(self.seed, int) and 0 <= self.seed < 1 << 64, "an integer in 0..2^64-1"),
        ) if not ok]
        if bad:
            name, value, expected = bad[0]
            raise ModelError("sampling option out of range", pointer=name, value=value, expected=expected)
        return self


class Sampler:
    """Stateful sampler: owns the random generator seeded from the config."""

    def __init__(self, config: SamplerConfig) -> None:
        self.config = config.check()
        self.rng = np.random.Generator(np.random.PCG64(config.seed))

    def sample(self, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        """Pick the next token from `logits` (1-D, not modified)."""
        cfg = self.config
        penalize = cfg.repeat_penalty != 1.0 and cfg.repeat_last_n > 0 and len(history) > 0
        if cfg.temperature <= 0.0 and not penalize:
            return int(np.argmax(logits))
        x = np.array(logits, dtype=np.float32, copy=True)
        if penalize:
            recent = np.unique(np.asarray(history[-cfg.repeat_last_n:], dtype=np.int64))
            vals = x[recent]
            x[recent] = np.where(vals > 0, vals / cfg.repeat_penalty, vals * cfg.repeat_penalty)
        if cfg.temperature <= 0.0:
            return int(np.argmax(x))
        k = cfg.top_k if 0 < cfg.top_k < x.size else x.size
        idx = np.argpartition(-x, k - 1)[:k] if k < x.size else np.arange(x.size)
        order = np.lexsort((idx, -x[idx]))  # by logit descending, then id ascending: deterministic
        idx = idx[order]
        z = x[idx].astype(np.float64) / cfg.temperature
        p = np.exp(z - z[0])
        p /= p.sum()
        keep = p.size
        if cfg.top_p < 1.0:
            keep = int(np.searchsorted(np.cumsum(p), cfg.top_p) + 1)
        if cfg.min_p > 0.0:
            keep = min(keep, int(np.count_nonzero(p >= cfg.min_p * p[0])))
        keep = max(keep, 1)
        p = p[:keep] / p[:keep].sum()
        return int(idx[int(self.rng.choice(keep, p=p))])
