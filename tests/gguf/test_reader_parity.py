"""Reader parity with gguf-py: keys, value types, values, tensor names, shapes, offsets and bytes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from gguf_fixtures import GT, VT, write_with_gguf_py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gguf
from kernelmap.gguf import GGUFArray, open_gguf


def _same_value(expected, got) -> bool:
    if isinstance(expected, float):
        return (math.isnan(expected) and math.isnan(got)) or expected == got
    if isinstance(expected, list):
        return len(expected) == len(got) and all(_same_value(e, g) for e, g in zip(expected, got, strict=True))
    return expected == got and type(expected) is type(got)


def assert_parity(path: Path, *, check_values: bool = True) -> None:
    """Compare everything gguf-py reads from `path` with what our reader reads."""
    ref = gguf.GGUFReader(str(path))
    with open_gguf(path) as ours:
        fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
        assert list(fields) == list(ours.metadata)
        for key, field in fields.items():
            assert [int(t) for t in field.types] == [int(t) for t in ours.metadata_types(key)], key
            if not check_values:
                continue
            got = ours.metadata[key]
            if isinstance(got, GGUFArray):
                got = got.tolist()
            assert _same_value(field.contents(), got), key
        assert [t.name for t in ref.tensors] == list(ours.tensors)
        for t in ref.tensors:
            info = ours.tensors[t.name]
            assert info.ggml_type == int(t.tensor_type)
            assert list(info.shape) == [int(d) for d in t.shape]
            assert info.n_elements == t.n_elements
            assert info.n_bytes == t.n_bytes
            assert info.offset == t.data_offset
            ref_bytes = np.asarray(t.data).reshape(-1).view(np.uint8)
            assert np.array_equal(ours.tensor_data(t.name), ref_bytes), t.name


def test_reader_gguf_py_file_matches_gguf_py(tmp_path):
    assert_parity(write_with_gguf_py(tmp_path / "a.gguf"))


def test_reader_custom_alignment_matches_gguf_py(tmp_path):
    path = write_with_gguf_py(tmp_path / "a.gguf", alignment=64)
    assert_parity(path)
    with open_gguf(path) as f:
        assert f.alignment == 64
        assert all(info.offset % 64 == 0 for info in f.tensors.values())


def test_reader_tensor_array_matches_written_values(tmp_path):
    path = write_with_gguf_py(tmp_path / "a.gguf")
    ref = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    with open_gguf(path) as f:
        for name in ("vec.weight", "mat.weight", "half.weight", "cube.weight"):
            assert np.array_equal(f.tensor_array(name), ref[name].data)
        assert f.tensor_array("cube.weight").shape == (2, 3, 4, 5)
        assert f.tensors["cube.weight"].shape == (5, 4, 3, 2)


def test_reader_metadata_scalars_are_python_types(tmp_path):
    with open_gguf(write_with_gguf_py(tmp_path / "a.gguf")) as f:
        assert f.metadata["test.u64"] == 2**64 - 1 and type(f.metadata["test.u64"]) is int
        assert f.metadata["test.bool"] is True
        assert f.metadata["test.str"] == "héllo wörld ✓ 🙂"
        assert isinstance(f.metadata["test.f32"], float)
        arr = f.metadata["test.arr_str"]
        assert isinstance(arr, GGUFArray) and len(arr) == 5 and arr[3] == "🙂" and arr[-1] == "a\nb"
        assert f.metadata_array("test.arr_i32").tolist() == [1, -2, 3]
        assert f.metadata_array("test.arr_bool").dtype == np.bool_


_SCALAR_STRATEGIES = {
    VT.UINT8: st.integers(0, 2**8 - 1), VT.INT8: st.integers(-(2**7), 2**7 - 1),
    VT.UINT16: st.integers(0, 2**16 - 1), VT.INT16: st.integers(-(2**15), 2**15 - 1),
    VT.UINT32: st.integers(0, 2**32 - 1), VT.INT32: st.integers(-(2**31), 2**31 - 1),
    VT.UINT64: st.integers(0, 2**64 - 1), VT.INT64: st.integers(-(2**63), 2**63 - 1),
    VT.FLOAT32: st.floats(width=32, allow_nan=False), VT.FLOAT64: st.floats(allow_nan=False),
    VT.BOOL: st.booleans(), VT.STRING: st.text(max_size=20),
}


@st.composite
def _random_file_spec(draw):
    keys = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_.]{0,20}", fullmatch=True), unique=True, max_size=8))
    kvs = []
    for key in keys:
        vtype = draw(st.sampled_from(sorted(_SCALAR_STRATEGIES)))
        if draw(st.booleans()):
            values = draw(st.lists(_SCALAR_STRATEGIES[vtype], min_size=1, max_size=6))
            kvs.append((key, values, VT.ARRAY, vtype))
        else:
            kvs.append((key, draw(_SCALAR_STRATEGIES[vtype]), vtype, None))
    n_tensors = draw(st.integers(0, 5))
    tensors = []
    for i in range(n_tensors):
        kind = draw(st.sampled_from(["f32", "f16", "q8_0", "q4_k"]))
        rows = draw(st.integers(1, 4))
        blocks = draw(st.integers(1, 3))
        tensors.append((f"t{i}.weight", kind, rows, blocks))
    return kvs, tensors, draw(st.sampled_from([None, 8, 64]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=_random_file_spec())
def test_reader_random_valid_files_match_gguf_py(tmp_path, spec):
    kvs, tensors, alignment = spec
    path = tmp_path / "r.gguf"
    w = gguf.GGUFWriter(str(path), "randomarch")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value, vtype, sub in kvs:
        w.add_key_value("x." + key, value, vtype, sub_type=sub)
    rng = np.random.default_rng(len(tensors))
    for name, kind, rows, blocks in tensors:
        if kind == "f32":
            w.add_tensor(name, rng.standard_normal((rows, blocks * 3)).astype(np.float32))
        elif kind == "f16":
            w.add_tensor(name, rng.standard_normal((rows, blocks)).astype(np.float16))
        elif kind == "q8_0":
            w.add_tensor(name, rng.integers(0, 255, (rows, 34 * blocks), dtype=np.uint8), raw_dtype=GT.Q8_0)
        else:
            w.add_tensor(name, rng.integers(0, 255, (rows, 144 * blocks), dtype=np.uint8), raw_dtype=GT.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert_parity(path)


@pytest.mark.model
def test_reader_real_model_matches_gguf_py(model_path):
    assert_parity(Path(model_path))


@pytest.mark.model
def test_reader_real_model_vocab_is_lazy_and_complete(model_path):
    with open_gguf(model_path) as f:
        tokens = f.metadata["tokenizer.ggml.tokens"]
        assert len(tokens) == 262144
        assert f.metadata_array("tokenizer.ggml.scores").shape == (262144,)
        assert tokens[2] == "<bos>"
        assert f.tensors["token_embd.weight"].type_name == "q8_0"
        assert f.tensors["token_embd.weight"].shape == (640, 262144)
