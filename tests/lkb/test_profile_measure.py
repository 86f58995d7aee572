"""`profile.measure`: per-op seconds of a compiled synthetic model, labelled with the selected provider variants."""

from __future__ import annotations

import json

import pytest
from synth_model import write_synth_model

from kernelmap.cli import main
from kernelmap.lkb.coverage import read_maps
from kernelmap.lkb.profile import load_profile, measure


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return write_synth_model(tmp_path_factory.mktemp("lkb-synth") / "synth.gguf", weight_type="q8_0")


@pytest.mark.parametrize("rows", [1, 16])
def test_measure_synth_model_labels_every_op_with_a_map_variant(synth, rows):
    entries = measure(synth, rows)
    declared = read_maps()
    assert entries and all((e.provider, e.variant) in declared for e in entries)
    assert all(e.seconds >= 0 for e in entries) and sum(e.seconds for e in entries) > 0
    assert len({e.op for e in entries}) == len(entries)


def test_cli_lkb_model_measures_and_saves_profile(synth, tmp_path, capsys):
    saved = tmp_path / "p.json"
    rc = main(["lkb", "-m", str(synth), "--save-profile", str(saved), "--json",
               "--measurements", str(tmp_path / "none.toml")])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and sorted(load_profile(saved)) == [1, 16, 128]
    for gap in doc["gaps"]:
        assert round(sum(gap["percent"].values()), 6) == 100.0
