"""Preset parity records (issue 13): the committed runs of tests/fixtures/make_preset_parity.py, for llama.cpp's
AVX-512 build (policy llama-cpu) and its AVX2 build (llama-cpu-avx2), cover every preset of the script's default
list (each preset llama.cpp's quantizer writes without an importance matrix), each with 5/5 greedy continuations
identical to llama.cpp's, the presets of types without kernels as the compiler's refusal; docs/FORMATS.md is the AVX-512 record's table.

The run itself (llama.cpp's quantizer and greedy decoding in the peer venv, about a minute per preset) is not part
of `make test`; these tests read its JSON output. `make parity` re-derives the record (`make_preset_parity.py
--check`, whose comparison the last test here checks).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "fixtures" / "make_preset_parity.py"
RECORD = ROOT / "tests" / "fixtures" / "formats" / "preset_parity.json"
RECORD_AVX2 = ROOT / "tests" / "fixtures" / "formats_avx2" / "preset_parity.json"
DOC = ROOT / "docs" / "FORMATS.md"
MUST_SHOW = ["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K", "F16", "BF16"]
# every type issue 13 names: the legacy and K quants, the float types; and iq4_nl (the IQ4_NL preset)
TYPES = {"q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "f16", "bf16", "f32", "iq4_nl"}
RECORDS = pytest.mark.parametrize("path", [RECORD, RECORD_AVX2], ids=["llama-cpu", "llama-cpu-avx2"])  # the policies


def _script():
    spec = importlib.util.spec_from_file_location("make_preset_parity", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _refusal(row: dict) -> bool:
    """A refused row: the compiler's one line names the file (not its path), the first tensor whose type has no
    kernel, and the types it supports (or knows, for a ggml type id newer than the reader's table)."""
    text = row["first_divergence"]
    return (row["identical"] is None and "/" not in row["file"]
            and text.startswith(f"refused: {row['file']}: tensors/blk.") and "/type: " in text
            and ("unsupported weight type" in text and "expected bf16, f16, f32, iq4_nl, q2_k" in text
                 or "unsupported ggml type id" in text and "expected one of f32, f16" in text))


@RECORDS
def test_preset_parity_record_every_preset_identical_to_llama_cpp(path):
    """Every preset of the script's default list is in the record (both llama.cpp builds), each with 5/5 greedy
    continuations identical, except the presets of types without kernels, whose rows are the compiler's refusal."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    rows = {r["preset"]: r for r in doc["rows"]}
    assert set(_script().DEFAULT) <= set(rows), sorted(set(_script().DEFAULT) - set(rows))
    assert set(MUST_SHOW) <= set(rows)
    bad = {p: (r["identical"], r["first_divergence"]) for p, r in rows.items()
           if not _refusal(r) and (r["identical"] != r["prompts"] or r["prompts"] != 5 or r["tokens"] != 64)}
    assert not bad, bad
    assert [p for p, r in rows.items() if _refusal(r)] == _script().REFUSED
    assert doc["peer"]["llama_cpp_python"] == "0.3.36"
    assert doc["record"] == str(path.relative_to(ROOT))


@RECORDS
def test_preset_parity_record_exercises_every_kquant_and_float_type(path):
    """Across the presets' files every legacy, K-quant and float type of issue 13 occurs in some matrix of a 5/5
    row (Q2_K_pure is the run with q2_K tensors: the Q2_K preset writes none on this model; Q4_1 the only q4_1)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    types = {t.split(":")[0] for r in doc["rows"] if r["identical"] == 5 for t in r["types"].split()}
    assert TYPES <= types, sorted(TYPES - types)


def test_formats_doc_is_the_record_rendered_by_the_script():
    want = _script().markdown(json.loads(RECORD.read_text(encoding="utf-8")))
    assert DOC.read_text(encoding="utf-8") == want, "regenerate: make_preset_parity.py --from-json ... --markdown"


def test_preset_parity_compare_reports_first_divergence():
    compare = _script().compare
    assert compare([[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 5]]) == (2, "-")
    assert compare([[1, 2, 3], [4, 5], [6]], [[1, 2, 3], [4, 9], [7]]) == (1, "prompt 1 token 1")


def test_preset_parity_check_names_every_row_that_differs_from_the_record():
    check = _script().check
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    same = [dict(r) for r in record["rows"]]
    assert check(record, same) == []
    assert check(record, same[:2]) == []  # a run of some presets only
    moved = [dict(r) for r in record["rows"][:3]]
    moved[0]["identical"], moved[0]["first_divergence"] = 4, "prompt 2 token 17"
    moved[2]["types"] = "q8_0:1"
    got = check(record, moved + [{"preset": "Q9_9", "types": "", "identical": 5, "first_divergence": "-"}])
    p0, p2 = record["rows"][0]["preset"], record["rows"][2]["preset"]
    assert got == [f"{p0}: identical 4, the record says 5",
                   f"{p0}: first_divergence 'prompt 2 token 17', the record says '-'",
                   f"{p2}: types 'q8_0:1', the record says {record['rows'][2]['types']!r}",
                   "Q9_9: not in the record"]
