"""The `ring` declaration of state ports (codegen/ring.py): the loader refuses what codegen could not honour."""

import json

import pytest

from kernelmap.errors import MapError
from kernelmap.maps import load_map
from kernelmap.maps.registry import MAPS_DIR


def _load(tmp_path, map_id, edit):
    doc = json.loads((MAPS_DIR / f"{map_id}.json").read_text(encoding="utf-8"))
    edit(doc)
    path = tmp_path / f"{map_id}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return load_map(path, kernel_root=None)


def test_ring_maps_load_with_their_declarations(tmp_path):
    att = _load(tmp_path, "attention_f16kv_ggmlfa", lambda d: None)
    app = _load(tmp_path, "kv_append_f16", lambda d: None)
    assert (att.ports["k_cache"].ring, att.ports["v_cache"].ring, app.ports["cache"].ring) == ("window", "window", "write")


def test_ring_on_a_port_that_is_not_state_is_refused(tmp_path):
    with pytest.raises(MapError, match="only state ports may declare ring") as exc:
        _load(tmp_path, "attention_f16kv_ggmlfa", lambda d: d["inputs"][0].update(ring="write"))
    assert exc.value.pointer == "/inputs/0/ring"


def test_ring_naming_a_float_param_is_refused(tmp_path):
    with pytest.raises(MapError, match="ring names no int64 param \"scale\""):
        _load(tmp_path, "attention_f16kv_ggmlfa", lambda d: d["inputs"][1].update(ring="scale"))


def test_ring_without_kv_cells_binding_is_refused(tmp_path):
    def edit(d):
        for cp in d["call_abi"]["params"]:
            if cp["source"] == "runtime:kv_cells":
                cp["source"] = "runtime:n_ctx"
    with pytest.raises(MapError, match="does not bind runtime:kv_cells"):
        _load(tmp_path, "kv_append_f16", edit)
