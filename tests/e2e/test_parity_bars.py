"""The parity tiers check exactly what the README claims: every greedy prompt, every top-1, top-5 logits to the
fixture's rounding, prefill == decode bit for bit. Fake models replay the committed llama.cpp fixtures
(tests/fixtures/llama_fa) with one deliberate flaw each; each flaw must fail its check.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernelmap import parity

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llama_fa"
FIXTURES_AVX2 = FIXTURES.parent / "llama_fa_avx2"  # llama.cpp built without AVX-512 (policy llama-cpu-avx2)
FIXTURES_AVX2_T2 = FIXTURES.parent / "llama_fa_avx2_t2"  # the same build on 2 threads (llama-cpu-avx2-t2)


def _load(name: str, folder: Path = FIXTURES) -> dict:
    return json.loads((folder / name).read_text(encoding="utf-8"))


class _Replay:
    """A model that returns llama.cpp's recorded top-5 logits (others -100) and greedy tokens, with flaws."""

    def __init__(self, *, bad_prompt: int | None = None, bad_top1_at: int | None = None,
                 nudge_at: int | None = None, decode_ulp: bool = False, folder: Path = FIXTURES,
                 exact: dict[int, tuple[int, float]] | None = None) -> None:
        self.greedy, self.teacher = _load("greedy.json", folder), _load("teacher.json", folder)
        self.exact = exact or {}  # position -> (k, a float32 value the k-th top-5 logit takes there)
        self.n_vocab = 2 + max(max(ids) for ids in self.teacher["top5_ids"])  # the last id is in no top-5
        self.bad_prompt, self.bad_top1_at, self.nudge_at, self.decode_ulp = bad_prompt, bad_top1_at, nudge_at, decode_ulp
        self.pos = 0
        self.threads = 1

    def stream(self, tokens, n, stop=()):
        i = next(i for i, p in enumerate(self.greedy["prompts"]) if p["tokens"] == list(tokens))
        out = list(self.greedy["prompts"][i]["continuation"][:n])
        if i == self.bad_prompt:
            out[-1] = (out[-1] + 1) % self.n_vocab
        yield from out

    def reset(self) -> None:
        self.pos = 0

    def _row(self, i: int) -> np.ndarray:
        row = np.full(self.n_vocab, -100.0, np.float32)
        ids, values = self.teacher["top5_ids"][i], self.teacher["top5_values"][i]
        row[np.asarray(ids)] = np.asarray(values, np.float32)
        if i == self.nudge_at:
            row[ids[1]] += np.float32(2e-5)
        if i in self.exact:
            k, value = self.exact[i]
            row[ids[k]] = np.float32(value)
        if i == self.bad_top1_at:
            row[-1] = np.float32(values[0]) + 1.0
        return row

    def prefill(self, tokens) -> np.ndarray:
        self.pos += len(tokens)
        return self._row(self.pos - 1)

    def decode(self, _token) -> np.ndarray:
        self.pos += 1
        row = self._row(self.pos - 1)
        return np.nextafter(row, np.float32(np.inf)) if self.decode_ulp else row

    def logits(self, tokens) -> np.ndarray:
        self.reset()
        return self.prefill(tokens).copy()


def _by_name(checks) -> dict:
    return {c.name.split(" over ")[0].split(" to llama.cpp")[0].split(" vs llama.cpp")[0]: c for c in checks}


@pytest.mark.parametrize("folder", [FIXTURES, FIXTURES_AVX2, FIXTURES_AVX2_T2],
                         ids=["avx512-build", "avx2-build", "avx2-build-t2"])
def test_tier2_exact_replay_passes_every_bar(folder):
    checks = parity.tier2(_Replay(folder=folder), folder)
    assert checks and all(c.passed for c in checks), [c for c in checks if not c.passed]


def test_tier2_top5_bar_passes_a_value_exactly_halfway_between_two_5_decimal_values():
    """llama.cpp's logit 19.546875 (a float32, a tie at 5 decimals) is stored as 19.54688: |diff| is 5e-6 plus the
    double error of 19.54688 (5.0000000016e-6), and the value is bit-identical, so the bar must pass (it did not)."""
    pos = 88
    k = _load("teacher.json", FIXTURES_AVX2)["top5_values"][pos].index(19.54688)
    checks = _by_name(parity.tier2(_Replay(folder=FIXTURES_AVX2, exact={pos: (k, 19.546875)}), FIXTURES_AVX2))
    assert checks["teacher-forced top-5 logits"].passed, checks["teacher-forced top-5 logits"]
    checks = _by_name(parity.tier2(_Replay(folder=FIXTURES_AVX2, exact={pos: (k, 19.546873)}), FIXTURES_AVX2))
    assert not checks["teacher-forced top-5 logits"].passed  # rounds to 19.54687


@pytest.mark.parametrize(("flaw", "check"), [
    ({"bad_prompt": 3}, "greedy continuations identical"),
    ({"bad_top1_at": 200}, "teacher-forced top-1 agreement"),
    ({"nudge_at": 100}, "teacher-forced top-5 logits"),
])
def test_tier2_one_flaw_fails_its_check(flaw, check):
    checks = _by_name(parity.tier2(_Replay(**flaw), FIXTURES))
    assert not checks[check].passed, checks[check]
    others = [c for name, c in checks.items() if name != check and not c.passed]
    assert not others, others


def test_tier2_names_the_llama_cpp_configuration_of_the_fixture():
    name = parity.tier2(_Replay(), FIXTURES)[0].name
    assert "1 thread" in name and "flash attention" in name and "one token per eval" in name, name


def test_tier1_one_ulp_between_prefill_and_decode_fails(monkeypatch):
    import kernelmap.runtime.model as runtime_model

    class _Other(_Replay):  # the model tier 1 loads with another thread count
        def __init__(self, *_a, **_kw):
            super().__init__()

        def close(self) -> None:
            pass

    monkeypatch.setattr(runtime_model, "Model", _Other)
    tokens = list(range(10))
    for ulp in (True, False):
        model = _Replay(decode_ulp=ulp)
        model.compiled, model.n_ctx = None, 64
        check = next(c for c in parity.tier1(model, tokens) if "decode" in c.name)
        assert check.bar == "bit-identical" and check.passed is not ulp, check


def _fixture_script():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "fixtures" / "make_llama_fixtures.py"
    spec = importlib.util.spec_from_file_location("make_llama_fixtures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("agreement", "rc"), [(0.9, 1), (0.9551, 0)])
def test_make_llama_fixtures_compare_exits_1_below_the_noise_floor(monkeypatch, capsys, agreement, rc):
    mod = _fixture_script()
    reference = {"greedy_identical": 0, "greedy_prompts": 5, "teacher_tokens": 512, "teacher_top1_agreement": 0.9,
                 "teacher_top5_logit_max_abs_diff": 1.0, "teacher_top5_logit_mean_abs_diff": 0.1,
                 "teacher_perplexity": 40.0, "peer_perplexity": 39.0, "peer_sequential_top1_agreement": 0.955}
    monkeypatch.setattr(mod, "compare_reference", lambda *a, **k: reference)
    monkeypatch.setattr(mod, "compare_compiled", lambda *a, **k: {
        "greedy_identical": 0, "greedy_prompts": 5, "teacher_top1_agreement_decode_steps": agreement})
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "llama"
    assert mod.main(["--against", str(fixtures), "--model", "unused.gguf"]) == rc
    out = capsys.readouterr().out
    assert ("FAIL" if rc else "PASS") + " compiled teacher-forced top-1" in out, out
