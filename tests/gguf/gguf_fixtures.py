"""Synthetic GGUF files for the reader tests: one written with gguf-py, one built byte by byte."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import gguf

GT = gguf.GGMLQuantizationType
VT = gguf.GGUFValueType


def write_with_gguf_py(path: Path, *, seed: int = 0, alignment: int | None = None) -> Path:
    """A file with every scalar type, string and numeric arrays, and f32/f16/q8_0/q4_k/q6_k tensors."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "testarch")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_key_value("test.u8", 200, VT.UINT8)
    w.add_key_value("test.i8", -100, VT.INT8)
    w.add_key_value("test.u16", 60000, VT.UINT16)
    w.add_key_value("test.i16", -30000, VT.INT16)
    w.add_key_value("test.u32", 4_000_000_000, VT.UINT32)
    w.add_key_value("test.i32", -2_000_000_000, VT.INT32)
    w.add_key_value("test.f32", 0.1, VT.FLOAT32)
    w.add_key_value("test.bool", True, VT.BOOL)
    w.add_key_value("test.u64", 2**64 - 1, VT.UINT64)
    w.add_key_value("test.i64", -(2**63), VT.INT64)
    w.add_key_value("test.f64", 1e300, VT.FLOAT64)
    w.add_key_value("test.str", "héllo wörld ✓ 🙂", VT.STRING)
    w.add_key_value("test.empty_str", "", VT.STRING)
    w.add_key_value("test.arr_str", ["<pad>", "▁the", "", "🙂", "a\nb"], VT.ARRAY, sub_type=VT.STRING)
    w.add_key_value("test.arr_f32", [float(x) for x in rng.standard_normal(7).astype(np.float32)],
                    VT.ARRAY, sub_type=VT.FLOAT32)
    w.add_key_value("test.arr_i32", [1, -2, 3], VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("test.arr_bool", [True, False, True], VT.ARRAY, sub_type=VT.BOOL)
    w.add_key_value("test.arr_u64", [0, 2**64 - 1], VT.ARRAY, sub_type=VT.UINT64)
    w.add_tensor("vec.weight", rng.standard_normal(64).astype(np.float32))
    w.add_tensor("mat.weight", rng.standard_normal((3, 32)).astype(np.float32))
    w.add_tensor("half.weight", rng.standard_normal((2, 5)).astype(np.float16))
    w.add_tensor("q8.weight", rng.integers(0, 255, (4, 2 * 34), dtype=np.uint8), raw_dtype=GT.Q8_0)
    w.add_tensor("q4k.weight", rng.integers(0, 255, (2, 144), dtype=np.uint8), raw_dtype=GT.Q4_K)
    w.add_tensor("q6k.weight", rng.integers(0, 255, (3, 210), dtype=np.uint8), raw_dtype=GT.Q6_K)
    w.add_tensor("cube.weight", rng.standard_normal((2, 3, 4, 5)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
