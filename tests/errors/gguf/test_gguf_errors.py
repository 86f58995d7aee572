"""GGUF error corpus: one hostile or broken input per case -> GGUFError with pointer and message fragment."""

from __future__ import annotations

import struct

import pytest

from kernelmap.errors import GGUFError
from kernelmap.gguf import open_gguf, open_gguf_bytes
from kernelmap.gguf.types import ValueType
from kernelmap.gguf.writer import KV, RawTensor, build_gguf, gguf_kv, gguf_string, sample_image

ARCH = KV("general.architecture", ValueType.STRING, "testarch")
F32 = 0
Q8_0 = 8
U64_MAX = 2**64 - 1


def _tensor_info(name: bytes, dims: list[int], type_id: int, offset: int) -> bytes:
    return gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + \
        struct.pack("<IQ", type_id, offset)


def _raw_header(n_tensors: int, n_kv: int, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _one_tensor_file(name: bytes, dims: list[int], type_id: int = F32, offset: int = 0,
                     data: bytes = b"\0" * 64) -> bytes:
    """One tensor info written by hand, padded to 32, then `data`."""
    body = _raw_header(1, 0) + _tensor_info(name, dims, type_id, offset)
    body += bytes((-len(body)) % 32)
    return body + data


def _kv_file(raw_kv: bytes, n_kv: int = 1) -> bytes:
    return _raw_header(0, n_kv) + raw_kv


# (case id, image builder, message fragment, pointer prefix)
CASES = [
    ("bad_magic", lambda: b"GGUX" + sample_image()[4:], "bad magic", "header/magic"),
    ("ggml_magic", lambda: b"lmgg" + sample_image()[4:], "bad magic", "header/magic"),
    ("version_0", lambda: build_gguf([ARCH], version=0), "unsupported GGUF version", "header/version"),
    ("version_1", lambda: build_gguf([ARCH], version=1), "unsupported GGUF version", "header/version"),
    ("version_4", lambda: build_gguf([ARCH], version=4), "unsupported GGUF version", "header/version"),
    ("version_big_endian", lambda: build_gguf([ARCH], version=3 << 24), "unsupported GGUF version",
     "header/version"),
    ("n_tensors_max", lambda: build_gguf([ARCH], n_tensors=U64_MAX), "tensor count exceeds",
     "header/n_tensors"),
    ("n_kv_max", lambda: build_gguf([ARCH], n_kv=U64_MAX), "metadata count exceeds", "header/n_kv"),
    ("n_kv_more_than_present", lambda: _kv_file(gguf_kv(ARCH) + gguf_kv(KV("a.b", ValueType.STRING, "xyz"))[:-2], n_kv=2),
     "truncated", "metadata/a.b"),
    ("key_length_max", lambda: _kv_file(struct.pack("<Q", U64_MAX) + b"k" * 20), "key length", "metadata[0]/key"),
    ("key_empty", lambda: _kv_file(gguf_string(b"") + struct.pack("<IB", ValueType.UINT8, 1) + bytes(20)),
     "key is empty", "metadata[0]/key"),
    ("key_bad_utf8", lambda: _kv_file(gguf_string(b"a\xff") + struct.pack("<IB", ValueType.UINT8, 1) + bytes(20)),
     "not valid UTF-8", "metadata[0]/key"),
    ("key_duplicate", lambda: build_gguf([ARCH, ARCH]), "duplicate metadata key", "metadata/general.architecture"),
    ("value_type_unknown", lambda: _kv_file(gguf_string("a.b") + struct.pack("<I", 13) + bytes(20)),
     "unknown value type", "metadata/a.b/type"),
    ("string_length_max", lambda: _kv_file(gguf_string("a.b") + struct.pack("<IQ", ValueType.STRING, U64_MAX)
                                           + bytes(20)), "exceeds the limit", "metadata/a.b"),
    ("string_length_past_end", lambda: _kv_file(gguf_string("a.b") + struct.pack("<IQ", ValueType.STRING, 21)
                                                + b"x" * 20), "truncated", "metadata/a.b"),
    ("string_bad_utf8", lambda: _kv_file(gguf_string("a.b") + struct.pack("<I", ValueType.STRING)
                                         + gguf_string(b"\xc3\x28")), "not valid UTF-8", "metadata/a.b"),
    ("bool_not_0_or_1", lambda: _kv_file(gguf_string("a.b") + struct.pack("<IB", ValueType.BOOL, 2) + bytes(20)),
     "bool value", "metadata/a.b"),
    ("array_nested", lambda: _kv_file(gguf_string("a.b") + struct.pack("<IIQ", ValueType.ARRAY, ValueType.ARRAY, 1)
                                      + bytes(40)), "nested arrays", "metadata/a.b/element_type"),
    ("array_element_type_unknown", lambda: _kv_file(gguf_string("a.b") + struct.pack("<IIQ", ValueType.ARRAY, 77, 1)
                                                    + bytes(40)), "unknown array element type",
     "metadata/a.b/element_type"),
    ("array_count_times_size_overflows",
     lambda: _kv_file(gguf_string("a.b") + struct.pack("<IIQ", ValueType.ARRAY, ValueType.UINT64, 2**61 + 1)
                      + bytes(64)), "array count times element size", "metadata/a.b/count"),
    ("array_count_max", lambda: _kv_file(gguf_string("a.b") + struct.pack("<IIQ", ValueType.ARRAY, ValueType.UINT8,
                                                                        U64_MAX) + bytes(64)),
     "array count times element size", "metadata/a.b/count"),
    ("string_array_count_max",
     lambda: _kv_file(gguf_string("a.b") + struct.pack("<IIQ", ValueType.ARRAY, ValueType.STRING, U64_MAX)
                      + bytes(64)), "array count exceeds", "metadata/a.b/count"),
    ("string_array_element_past_end",
     lambda: _kv_file(gguf_string("a.b") + struct.pack("<IIQ", ValueType.ARRAY, ValueType.STRING, 2)
                      + gguf_string("ok") + struct.pack("<Q", 1000) + b"short"),
     "string length runs past the end", "metadata/a.b/1"),
    ("alignment_not_power_of_two",
     lambda: build_gguf([ARCH, KV("general.alignment", ValueType.UINT32, 48)]), "not a power of two",
     "metadata/general.alignment"),
    ("alignment_zero", lambda: build_gguf([ARCH, KV("general.alignment", ValueType.UINT32, 0)]),
     "not a power of two", "metadata/general.alignment"),
    ("alignment_huge", lambda: build_gguf([ARCH, KV("general.alignment", ValueType.UINT32, 2**31)]),
     "not a power of two", "metadata/general.alignment"),
    ("alignment_wrong_type", lambda: build_gguf([ARCH, KV("general.alignment", ValueType.INT32, 32)]),
     "wrong type", "metadata/general.alignment"),
    ("tensor_dims_zero", lambda: _one_tensor_file(b"t", [0, 4]), "zero dimension", "tensor[0]/dims"),
    ("tensor_dims_overflow", lambda: _one_tensor_file(b"t", [2**32, 2**32, 2**32]), "element count overflows",
     "tensor[0]/dims"),
    ("tensor_dims_u64_max", lambda: _one_tensor_file(b"t", [U64_MAX, U64_MAX]), "element count overflows",
     "tensor[0]/dims"),
    ("tensor_n_dims_zero", lambda: _one_tensor_file(b"t", []), "dimension count out of range", "tensor[0]/n_dims"),
    ("tensor_n_dims_five", lambda: _one_tensor_file(b"t", [1, 1, 1, 1, 1]), "dimension count out of range",
     "tensor[0]/n_dims"),
    ("tensor_name_too_long", lambda: _one_tensor_file(b"t" * 64, [4]), "tensor name length", "tensor[0]/name"),
    ("tensor_name_bad_utf8", lambda: _one_tensor_file(b"\xfft", [4]), "not valid UTF-8", "tensor[0]/name"),
    ("tensor_name_control_char", lambda: _one_tensor_file(b"t\x1b[2J", [4]), "control characters",
     "tensor[0]/name"),
    ("tensor_row_not_block_multiple", lambda: _one_tensor_file(b"t", [33, 1], Q8_0), "not a multiple",
     "tensor[0]/dims"),
    ("tensor_offset_past_end", lambda: build_gguf([ARCH], [RawTensor("t", (4,), F32, offset=4096)]),
     "past the end of the file", "tensor[0]/offset"),
    ("tensor_offset_u64_max", lambda: build_gguf([ARCH], [RawTensor("t", (4,), F32, offset=U64_MAX - 31)]),
     "past the end of the file", "tensor[0]/offset"),
    ("tensor_offset_misaligned", lambda: build_gguf([ARCH], [RawTensor("t", (4,), F32, offset=4)]),
     "misaligned", "tensor[0]/offset"),
    ("tensor_data_truncated", lambda: build_gguf([ARCH], [RawTensor("t", (64,), F32)])[:-1],
     "past the end of the file", "tensor[0]/offset"),
    ("tensor_overlap", lambda: build_gguf([ARCH], [RawTensor("a", (64,), F32), RawTensor("b", (64,), F32, offset=32)]),
     "overlaps", "tensor[1]/offset"),
    ("tensor_same_offset", lambda: build_gguf([ARCH], [RawTensor("a", (8,), F32), RawTensor("b", (8,), F32, offset=0)]),
     "overlaps", "tensor[1]/offset"),
    ("tensor_duplicate_name", lambda: build_gguf([ARCH], [RawTensor("a", (8,), F32), RawTensor("a", (8,), F32)]),
     "duplicate tensor name", "tensor[1]/name"),
]


@pytest.mark.parametrize("case_id,make,fragment,pointer", CASES, ids=[c[0] for c in CASES])
def test_reader_bad_input_raises_gguf_error(case_id, make, fragment, pointer):
    with pytest.raises(GGUFError) as info:
        open_gguf_bytes(make(), name=f"{case_id}.gguf")
    err = info.value
    assert fragment in str(err)
    assert err.path == f"{case_id}.gguf"
    assert err.pointer is not None and err.pointer.startswith(pointer), err.pointer
    assert "\n" not in err.line()


def test_reader_version_error_names_found_and_expected():
    with pytest.raises(GGUFError) as info:
        open_gguf_bytes(build_gguf([ARCH], version=4))
    assert info.value.value == 4 and info.value.expected == "2 or 3"


def test_reader_byte_swapped_version_hints_big_endian():
    with pytest.raises(GGUFError) as info:
        open_gguf_bytes(build_gguf([ARCH], version=3 << 24))
    assert "big-endian" in (info.value.hint or "")


def test_reader_every_truncation_of_small_file_raises_gguf_error():
    image = sample_image()
    open_gguf_bytes(image)
    for n in range(len(image)):
        with pytest.raises(GGUFError):
            open_gguf_bytes(image[:n], name="cut.gguf")


def test_reader_version_2_file_opens():
    f = open_gguf_bytes(build_gguf([ARCH], [RawTensor("t", (8,), F32)], version=2))
    assert f.version == 2 and list(f.tensors) == ["t"]


def test_reader_unknown_type_in_unneeded_tensor_opens():
    image = build_gguf([ARCH], [RawTensor("odd", (8,), 99, data=bytes(32)), RawTensor("t", (8,), F32)])
    f = open_gguf_bytes(image, name="odd.gguf")
    assert f.tensors["odd"].type_name == "unknown:99"
    assert f.tensor_array("t").shape == (8,)


@pytest.mark.parametrize("access", ["tensor_data", "tensor_array", "n_bytes", "block_size"])
def test_reader_unknown_type_in_needed_tensor_raises_naming_tensor_and_id(access):
    image = build_gguf([ARCH], [RawTensor("odd.weight", (8,), 99, data=bytes(32))])
    f = open_gguf_bytes(image, name="odd.gguf")
    with pytest.raises(GGUFError) as info:
        if access in ("tensor_data", "tensor_array"):
            getattr(f, access)("odd.weight")
        else:
            getattr(f.tensors["odd.weight"], access)
    assert "'odd.weight'" in str(info.value) and "type id 99" in str(info.value)
    assert info.value.value == 99


def test_reader_bad_utf8_in_string_array_fails_on_access():
    image = build_gguf([ARCH, KV("tokenizer.ggml.tokens", ValueType.ARRAY, [b"ok", b"\xff"], ValueType.STRING)])
    f = open_gguf_bytes(image, name="v.gguf")
    assert f.metadata["tokenizer.ggml.tokens"][0] == "ok"
    with pytest.raises(GGUFError) as info:
        f.metadata_array("tokenizer.ggml.tokens")
    assert info.value.pointer == "metadata/tokenizer.ggml.tokens/1" and "not valid UTF-8" in str(info.value)


def test_reader_bad_bool_in_array_fails_on_access():
    image = build_gguf([ARCH, KV("a.flags", ValueType.ARRAY, [1, 0, 5], ValueType.BOOL)])
    f = open_gguf_bytes(image)
    with pytest.raises(GGUFError, match="bool element"):
        f.metadata_array("a.flags")


def test_reader_block_quantized_tensor_array_raises():
    f = open_gguf_bytes(sample_image())
    with pytest.raises(GGUFError, match="block-quantized"):
        f.tensor_array("b.weight")


def test_reader_missing_file_raises(tmp_path):
    with pytest.raises(GGUFError, match="cannot open"):
        open_gguf(tmp_path / "nope.gguf")


def test_reader_directory_raises(tmp_path):
    with pytest.raises(GGUFError, match="not a regular file"):
        open_gguf(tmp_path)


def test_reader_empty_file_raises_truncated(tmp_path):
    (tmp_path / "e.gguf").write_bytes(b"")
    with pytest.raises(GGUFError, match="truncated") as info:
        open_gguf(tmp_path / "e.gguf")
    assert info.value.pointer == "header/magic"


def test_reader_error_message_escapes_control_bytes():
    with pytest.raises(GGUFError) as info:
        open_gguf_bytes(b"\x1b[31" + sample_image()[4:])
    assert "\x1b" not in str(info.value)


def test_reader_file_truncated_after_open_raises_instead_of_sigbus(tmp_path):
    path = tmp_path / "shrink.gguf"
    path.write_bytes(build_gguf([ARCH], [RawTensor("t", (4096,), F32)]))
    f = open_gguf(path)
    try:
        with open(path, "r+b") as fh:
            fh.truncate(64)
        with pytest.raises(GGUFError, match="shrank"):
            f.tensor_data("t")
    finally:
        f.close()


def test_reader_huge_metadata_count_hits_absolute_cap():
    with pytest.raises(GGUFError, match="metadata count exceeds the limit"):
        open_gguf_bytes(build_gguf([ARCH], n_kv=(1 << 16) + 1))
