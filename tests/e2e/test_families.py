"""The product-space parity matrix on the committed family fixtures: every (architecture, preset) cell against
llama.cpp's logits (prompt + 32 greedy steps, one token per decode, as llama.cpp ran them).

Every cell is pinned to the README's table (EXPECTED below, one line per row; a cell the fixtures or matrix.json
add fails until it gets its own expectation): bit-exact cells must give llama.cpp's every logit bit for bit (bit
patterns, so -0.0 against +0.0 or another NaN payload counts) after the prompt and after each greedy step, with
the same greedy tokens, and a refused cell must be refused with exactly the README's reason, naming the tensor and
its type. The README's table must be what `kernelmap parity --matrix --markdown` (markdown_table) prints for these
expectations, so the README cannot drift from what is tested.
The cells are compiled with the scalar `ref` variants (every SIMD variant is bit-exact with its ref under
the same contract, tested per kernel), which keeps the whole matrix near a minute; the host's SIMD
build of the bit-exact cells runs under KERNELMAP_SLOW=1.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import KernelmapError
from kernelmap.families.matrix import Cell, load_fixtures, markdown_table, matrix_spec, model_path, run_cell
from kernelmap.runtime.model import Model

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "families"
README = Path(__file__).resolve().parents[2] / "README.md"
REF_ONLY = CompileOptions(max_rows=16, isa=frozenset())
PRESETS = ("Q8_0", "Q4_K_M", "Q4_0", "F16")
EXACT = "bit-exact"
F16_EXPERTS = ("refused: tensors/blk.0.ffn_up_exps.weight/type: unsupported weight type for moe_linear under policy "
               "llama-cpu (found f16)")
# The README's table, cell by cell (its text), rows in the manifest's order, columns in PRESETS' order. Rows: the
# five circuits at their tiny dims, and llama at dims that are not multiples of 256 (llama.cpp's Q4_K_M then falls
# back to q5_0/q8_0 as on the full-size SmolLM2-135M; head dim 64, 3 q heads per kv head, tied output).
EXPECTED = {
    "llama": (EXACT, EXACT, EXACT, EXACT),
    "qwen2": (EXACT, EXACT, EXACT, EXACT),
    "qwen3": (EXACT, EXACT, EXACT, EXACT),
    "phi3": (EXACT, EXACT, EXACT, EXACT),
    "qwen3moe": (EXACT, EXACT, EXACT, F16_EXPERTS),  # no f16 expert linear (moe_linear) rule
    "llama-d192": (EXACT, EXACT, EXACT, EXACT),
}
ROWS = tuple(EXPECTED)
CELLS = [(a, p) for a in ROWS for p in PRESETS]


def _expected(arch: str, preset: str) -> str:
    """The pinned README text of a cell (an error for a cell without an expectation)."""
    return EXPECTED[arch][PRESETS.index(preset)]


def _pinned_cells() -> list[Cell]:
    """The pinned expectations as the matrix's cells, for markdown_table."""
    cells = []
    for arch, preset in CELLS:
        text = _expected(arch, preset)
        status, _, error = text.partition(": ")
        cells.append(Cell(arch, preset, status, error=error))
    return cells


@pytest.fixture(scope="module")
def fixtures():
    return load_fixtures(FIX)


def _bits(fixtures, arch, preset, work):
    """Compile one cell and compare our logits' bit patterns with llama.cpp's: the positions (one token per decode
    on llama.cpp's tokens) with any differing logit, the first difference (position, logit, llama.cpp's bits, ours),
    and whether the prompt's prefill gives its last row bit for bit; None when the compiler refuses the cell."""
    try:
        compiled = compile_model(model_path(fixtures, arch, preset, work), REF_ONLY)
    except KernelmapError:
        return None
    peer = np.load(FIX / "peer" / f"{arch}-{preset}.npz")
    tokens = [int(t) for t in peer["tokens"]]
    want = np.asarray(peer["logits"], np.float32).view(np.uint32)
    prompt = [int(t) for t in fixtures["models"][arch]["prompt"]]
    with Model(compiled, n_ctx=max(64, len(tokens) + 1), threads=1) as model:
        got = np.stack([(model.prefill([t]) if i == 0 else model.decode(t)).copy() for i, t in enumerate(tokens)])
        model.reset()
        prefill = model.prefill(prompt).copy()
    got = np.asarray(got, np.float32).view(np.uint32)
    prefill = np.asarray(prefill, np.float32).view(np.uint32)
    differ = got != want
    first = None
    if differ.any():
        pos, idx = (int(v) for v in np.argwhere(differ)[0])
        first = (pos, idx, f"{int(want[pos, idx]):#010x}", f"{int(got[pos, idx]):#010x}")
    return {"positions": np.flatnonzero(differ.any(1)).tolist(), "first": first,
            "prefill": bool(np.array_equal(prefill, want[len(prompt) - 1]))}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Where the F16 models are written again from their seeds (once for both passes)."""
    return tmp_path_factory.mktemp("family-models")


@pytest.fixture(scope="module")
def bits(fixtures, work):
    """Every cell's bit comparison, two cells at a time (gcc and the models run outside the GIL); the builds are then
    cached for run_cell."""
    every = [(a, p) for a in fixtures["models"] for p in matrix_spec()["presets"]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(every, pool.map(lambda cell: _bits(fixtures, *cell, work), every), strict=True))


@pytest.fixture(scope="module")
def cells(fixtures, bits, work):
    """Every cell the fixtures and matrix.json make (as `kernelmap parity --matrix` runs them), by run_cell."""
    return {cell: run_cell(fixtures, *cell, work=work, options=REF_ONLY) for cell in bits}


def test_family_fixtures_cover_every_circuit_and_preset(fixtures):
    """Every cell the fixtures and matrix.json make has its pinned expectation, rows in the manifest's order (the
    order `kernelmap parity --matrix --markdown` prints, and the README's), with the README's 32 greedy steps."""
    assert list(fixtures["models"]) == list(EXPECTED), "a fixture model needs its row of expectations in EXPECTED"
    assert matrix_spec()["presets"] == list(PRESETS), "a preset needs its column of expectations in EXPECTED"
    assert all(len(row) == len(PRESETS) for row in EXPECTED.values()), EXPECTED
    assert fixtures["steps"] == 32
    odd = fixtures["models"]["llama-d192"]
    assert odd["arch"] == "llama" and odd["overrides"]["d_model"] % 256 and odd["overrides"]["head_dim"] == 64
    assert odd["presets"]["Q4_K_M"]["tensor_types"] == ["f32", "q5_0", "q8_0"]  # llama.cpp's fallback types
    assert matrix_spec()["presets"] == ["Q8_0", "Q4_K_M", "Q4_0", "F16"]
    for arch, entry in fixtures["models"].items():
        assert sorted(entry["presets"]) == sorted(matrix_spec()["presets"]), arch
        assert len(entry["prompt"]) + fixtures["steps"] == 40


def test_family_fixtures_were_made_by_the_peer_build_of_the_gemma_fixtures(fixtures):
    gemma = json.loads((FIX.parent / "llama_ops" / "ops.json").read_text())["peer"]
    assert fixtures["settings"]["system_info"] == gemma["system_info"]
    assert fixtures["settings"]["version"] == gemma["llama_cpp_python"]
    assert fixtures["settings"]["flash_attn"] and fixtures["settings"]["n_threads"] == 1


@pytest.mark.parametrize("arch,preset", CELLS, ids=[f"{a}-{p}" for a, p in CELLS])
def test_family_matrix_cell_meets_its_bar(cells, bits, arch, preset):
    """The cell is what the README's table says: bit-exact (every logit's bit pattern at all 40 positions and after
    the prompt's prefill, the same greedy tokens, no contract excused) or refused with exactly the README's reason."""
    cell = cells[(arch, preset)]
    detail = json.dumps(cell.as_dict(), default=str)[:600]
    want = _expected(arch, preset)
    assert cell.text() == want, f"{arch} {preset}: the README says {want!r}: {detail}"
    if want != EXACT:
        return
    assert cell.positions == 40 and cell.greedy_identical and cell.prefill_exact and not cell.reasons, detail
    got = bits[(arch, preset)]
    assert got is not None, f"{arch} {preset}: refused in the bit comparison's compile: {detail}"
    assert not got["positions"] and got["prefill"], (
        f"{arch} {preset}: positions whose logits differ from llama.cpp's in their bits: {got['positions'][:10]} "
        f"(first: position, logit, llama.cpp's bits, ours: {got['first']}); prompt prefill bit-exact: {got['prefill']}")


def test_family_matrix_exact_cells_need_no_listed_contract(cells):
    """A cell is only ever excused by a listed contract: the non-exact ones list exactly the q4_0 linears."""
    for (arch, preset), cell in cells.items():
        if cell.status == "tolerance":
            assert cell.reasons and all("q4_0" in r for r in cell.reasons), (arch, preset, cell.reasons)
        if cell.status == "bit-exact":
            assert not cell.reasons and cell.prefill_exact and cell.greedy_identical, (arch, preset)


def test_family_matrix_markdown_of_the_results_is_the_pinned_table(cells):
    """markdown_table of the results (what `kernelmap parity --matrix --markdown` prints) has one row per
    architecture and is the table of the pinned expectations, cell for cell (a cell without one fails here too)."""
    table = markdown_table(list(cells.values()))
    lines = table.splitlines()
    assert lines[0] == "| architecture | Q8_0 | Q4_K_M | Q4_0 | F16 |"
    assert [ln.split("|")[1].strip() for ln in lines[2:]] == list(ROWS)
    assert all(ln.count("|") == 6 for ln in lines)
    assert table == markdown_table(_pinned_cells())


def test_readme_family_table_is_the_markdown_of_the_pinned_cells():
    """The README's family table is markdown_table of the pinned expectations, line for line, so the README cannot
    drift from what the cell tests hold the results to (cheap: it runs no model)."""
    pinned = markdown_table(_pinned_cells()).splitlines()
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines.count(pinned[0]) == 1, f"README.md: expected one family table with the header {pinned[0]!r}"
    start = lines.index(pinned[0])
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    assert lines[start:end] == pinned, "README.md's family table differs from `kernelmap parity --matrix --markdown`"


SIMD_CELLS = [(a, p) for a, p in CELLS if _expected(a, p) == EXACT]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("KERNELMAP_SLOW"), reason="slow (host SIMD build of the 23 bit-exact cells, "
                    "~40 s each): set KERNELMAP_SLOW=1; the ref-variant matrix above runs always")
@pytest.mark.parametrize("arch,preset", SIMD_CELLS, ids=[f"{a}-{p}" for a, p in SIMD_CELLS])
def test_family_matrix_host_simd_build_is_bit_exact(fixtures, tmp_path, arch, preset):
    """Every bit-exact cell on the host's SIMD variants (2 threads), and the whole 40-token sequence prefilled at
    once: chunks of 16 rows go through the prefill GEMMs, whose last row must be llama.cpp's last logits bit for
    bit (llama.cpp ran one token per decode; the fixture prompts alone are shorter than 16 rows)."""
    options = CompileOptions(max_rows=16)
    cell = run_cell(fixtures, arch, preset, work=tmp_path, options=options, threads=2)
    assert cell.status == "bit-exact" and cell.greedy_identical, json.dumps(cell.as_dict(), default=str)[:600]
    peer = np.load(FIX / "peer" / f"{arch}-{preset}.npz")
    tokens = [int(t) for t in peer["tokens"]]
    assert len(tokens) > 2 * 16
    with Model(compile_model(model_path(fixtures, arch, preset, tmp_path), options), n_ctx=64, threads=2) as model:
        last = model.prefill(tokens).copy()
    want = np.asarray(peer["logits"], np.float32)[len(tokens) - 1]
    assert np.array_equal(last.view(np.uint32), want.view(np.uint32)), (
        f"{arch} {preset}: prefill of {len(tokens)} tokens differs from llama.cpp at "
        f"{np.flatnonzero(last.view(np.uint32) != want.view(np.uint32))[:6].tolist()}")
