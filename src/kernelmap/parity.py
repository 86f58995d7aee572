"""Parity tiers: self-consistency (1), agreement with llama.cpp and the reference (2), perplexity (3) of a model.

Input: a loaded `Model` (and, for tiers 2 and 3, llama.cpp fixture files written by
tests/fixtures/make_llama_fixtures.py and our NumPy reference). Output: a list of named checks, each
with its measured value, its bar and pass/fail, for `kernelmap parity` and the tests. It compiles
nothing itself and never runs llama.cpp (the fixtures script does).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import ModelError

__all__ = ["Check", "fixture_config", "tier1", "tier2", "tier3", "load_fixture", "log_softmax_at"]


@dataclass(frozen=True)
class Check:
    """One parity check: what, the measured value, the bar, and whether it passed."""

    tier: int
    name: str
    value: Any
    bar: str
    passed: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_fixture(directory: Path, name: str) -> dict[str, Any]:
    """Load one llama.cpp fixture (greedy.json, teacher.json) or fail with the command that makes it."""
    path = directory / name
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelError("llama.cpp fixture not found", path=path, hint="run `make fixtures`") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"fixture is not valid JSON: {exc}", path=path) from None
    except RecursionError:
        raise ModelError("fixture is not valid JSON: nested too deeply", path=path) from None


def tier1(model: Any, tokens: list[int], split: int | None = None) -> list[Check]:
    """Self-consistency on this machine: repeat runs, thread counts and prefill vs decode, all bit-identical."""
    from kernelmap.runtime.model import Model

    checks: list[Check] = []
    runs = [model.logits(tokens) for _ in range(3)]
    checks.append(Check(1, "three runs bit-identical", all(np.array_equal(runs[0], r) for r in runs[1:]),
                        "bit-identical", all(np.array_equal(runs[0], r) for r in runs[1:])))
    other_threads = 1 if model.threads != 1 else 2
    other = Model(model.compiled, n_ctx=model.n_ctx, threads=other_threads)
    try:
        same = bool(np.array_equal(other.logits(tokens), runs[0]))
    finally:
        other.close()
    checks.append(Check(1, f"{model.threads} vs {other_threads} threads bit-identical", same, "bit-identical", same))
    k = split if split is not None else max(1, len(tokens) // 2)
    if not 1 <= k < len(tokens):
        raise ModelError("prefill/decode split out of range", value=k, expected=f"1..{len(tokens) - 1}")
    model.reset()
    model.prefill(tokens[:k])
    for tok in tokens[k:]:
        stepped = model.decode(tok)
    same = bool(np.array_equal(stepped, runs[0]))
    diff = float(np.max(np.abs(stepped.astype(np.float64) - runs[0])))
    checks.append(Check(1, f"prefill {len(tokens)} vs prefill {k} + decode {len(tokens) - k} bit-identical",
                        f"max |diff| {diff:.3g}", "bit-identical", same))
    return checks


def log_softmax_at(logits: np.ndarray, token: int) -> float:
    """log p(token) under softmax(logits), in float64."""
    x = logits.astype(np.float64)
    m = float(x.max())
    return float(x[token] - m - math.log(float(np.exp(x - m).sum())))


def fixture_config(fixture: dict[str, Any]) -> str:
    """The llama.cpp configuration a fixture was recorded with, in words (for check names and reports)."""
    peer = fixture.get("peer", {})
    threads = peer.get("n_threads", "?")
    fa = "flash attention" if peer.get("flash_attn") else "no flash attention"
    batch = "one token per eval" if peer.get("n_batch") == 1 else f"batches of {peer.get('n_batch', '?')}"
    return f"llama.cpp {peer.get('llama_cpp_python', '?')}, {threads} thread{'s' if threads != 1 else ''}, {fa}, {batch}"


# |ours - fixture| for values that round to the fixture's 5 decimals: at most 5e-6, plus the binary error of the
# fixture's decimal itself (an exact tie such as 19.546875 rounds to 19.54688, stored as 19.5468800000000016 in a
# double: |diff| 5.0000000016e-6 for bit-identical logits)
_HALF_ULP_5DP = 5e-6 + 1e-12


def tier2(model: Any, fixtures: Path, *, reference: Any | None = None, n_greedy: int | None = None,
          teacher_tokens: int | None = None) -> list[Check]:
    """Agreement with llama.cpp fixtures and the NumPy reference, with the bars the README claims.

    Greedy continuations identical for every prompt, teacher-forced top-1 equal at every position, and
    llama.cpp's top-5 logits reproduced to the fixture's rounding (5 decimals: ours rounded the same way
    equal theirs, |diff| <= 5e-6) at every position. The bars hold only against fixtures of the llama.cpp
    configuration the policy reproduces (llama-cpu: 1 thread, flash attention, one token per eval).
    """
    checks: list[Check] = []
    greedy = load_fixture(fixtures, "greedy.json")
    config = fixture_config(greedy)
    prompts = greedy["prompts"]
    identical = 0
    for p in prompts:
        want = p["continuation"][: n_greedy or len(p["continuation"])]
        got = list(model.stream(p["tokens"], len(want), stop=()))
        identical += got == want
    checks.append(Check(2, f"greedy continuations identical to {config}", f"{identical}/{len(prompts)}",
                        f"{len(prompts)}/{len(prompts)}", identical == len(prompts)))
    teacher = load_fixture(fixtures, "teacher.json")
    toks = teacher["tokens"][: teacher_tokens or len(teacher["tokens"])]
    top1 = teacher["top1"]
    top_ids, top_values = teacher.get("top5_ids"), teacher.get("top5_values")
    model.reset()
    agree = 0
    worst = 0.0
    rounded_equal = True
    logits = model.prefill(toks[:1])
    for i in range(len(toks) - 1):
        agree += int(np.argmax(logits)) == top1[i]
        if top_ids is not None and top_values is not None:
            ours = [float(x) for x in np.asarray(logits, np.float32)[np.asarray(top_ids[i])]]
            want_v = [float(x) for x in top_values[i]]
            worst = max(worst, max(abs(a - b) for a, b in zip(ours, want_v, strict=True)))
            rounded_equal = rounded_equal and [round(a, 5) for a in ours] == want_v
        logits = model.decode(toks[i + 1])
    n_pos = max(len(toks) - 1, 1)
    checks.append(Check(2, f"teacher-forced top-1 agreement over {len(toks) - 1} positions", round(agree / n_pos, 4),
                        "1.0 (every position)", agree == len(toks) - 1))
    if top_ids is not None and top_values is not None:
        checks.append(Check(2, "teacher-forced top-5 logits vs llama.cpp (fixture rounded to 5 decimals): max |diff|",
                            round(worst, 7), "ours rounded to 5 decimals equal llama.cpp's at every position "
                            "(|diff| <= 5e-6)", rounded_equal and worst <= _HALF_ULP_5DP))
    if reference is not None:
        probe = prompts[0]["tokens"]
        ours = model.logits(probe)
        ref = reference.logits(probe)
        diff = float(np.mean(np.abs(ours - ref)))
        # The reference sums dot products in float64 while kernels use fixed-order f32 sums; a last-bit
        # difference can flip an 8-bit activation rounding, which moves logits by ~0.2 on this model.
        checks.append(Check(2, "logits vs NumPy reference: mean |diff|", round(diff, 5), "<= 0.5", diff <= 0.5))
        same_top = int(np.argmax(ours)) == int(np.argmax(ref))
        checks.append(Check(2, "top-1 equals NumPy reference", same_top, "equal", same_top))
    return checks


def tier3(model: Any, fixtures: Path, *, margin: float = 1e-9, teacher_tokens: int | None = None) -> list[Check]:
    """Perplexity of the teacher text equal to llama.cpp's (relative `margin`: float64 summation order only).

    The fixture's perplexity comes from llama.cpp's own logits; with bit-identical logits the two differ
    only in how the float64 log-likelihoods are summed. Pass a larger margin to use a fixture of another
    llama.cpp configuration as an accuracy bar.
    """
    teacher = load_fixture(fixtures, "teacher.json")
    toks = teacher["tokens"][: teacher_tokens or len(teacher["tokens"])]
    model.reset()
    logits = model.prefill(toks[:1])
    nll = 0.0
    for i in range(1, len(toks)):
        nll -= log_softmax_at(logits, toks[i])
        if i < len(toks) - 1:
            logits = model.decode(toks[i])
    ppl = math.exp(nll / (len(toks) - 1))
    peer = teacher.get("perplexity")
    if peer is None:
        return [Check(3, "perplexity of the teacher text", round(ppl, 4), "llama.cpp value not in fixture "
                      "(run `make fixtures`)", False)]
    rel = abs(ppl - peer) / peer
    return [Check(3, f"perplexity {ppl:.4f} vs llama.cpp {peer:.4f}", f"relative diff {rel:.3g}",
                  f"relative diff <= {margin:g}", rel <= margin)]
