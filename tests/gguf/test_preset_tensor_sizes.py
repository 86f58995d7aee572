"""GGUF reader: for every tensor type llama.cpp's standard presets write, bytes that disagree with the tensor's
type and shape are refused by name (issue 13's "bad input").

The byte size of a tensor is rows x (K / block values) x block bytes of its type. tests/gguf/
test_kquant_tensor_sizes.py covers the K-quants' truncation, overlap and row-length cases; this file covers
the legacy block types and the float types the same way, and for every type the opposite disagreement: a data
region (up to the next tensor) longer than the type and shape imply, which llama.cpp's packed layout rules out
(a wrong type or shape, e.g. an f16 tensor labelled q8_0). Each refusal is one line naming the tensor and
pointing at its field.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelmap.errors import GGUFError
from kernelmap.gguf import open_gguf_bytes
from kernelmap.gguf.types import ValueType
from kernelmap.gguf.writer import KV, RawTensor, build_gguf

ARCH = KV("general.architecture", ValueType.STRING, "testarch")
# type name: (GGML type id, values per block, bytes per block)
TYPES = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q4_1": (3, 32, 20), "q5_0": (6, 32, 22),
         "q5_1": (7, 32, 24), "q8_0": (8, 32, 34), "q2_k": (10, 256, 84), "q3_k": (11, 256, 110),
         "q4_k": (12, 256, 144), "q5_k": (13, 256, 176), "q6_k": (14, 256, 210), "bf16": (30, 1, 2)}
LEGACY_AND_FLOAT = sorted(t for t, (_, qk, _) in TYPES.items() if qk < 256)
K = 512  # a row of 2 K-quant blocks, 16 legacy blocks or 512 floats


def _row_bytes(t: str) -> int:
    _, qk, blk = TYPES[t]
    return K // qk * blk


def _refused(image: bytes, name: str) -> GGUFError:
    with pytest.raises(GGUFError) as info:
        open_gguf_bytes(image, name=name)
    err = info.value
    assert "\n" not in err.line() and err.path == name
    return err


@pytest.mark.parametrize("t", LEGACY_AND_FLOAT)
def test_gguf_tensor_of_each_preset_type_well_formed_reads_its_bytes(t: str) -> None:
    tid = TYPES[t][0]
    data = np.random.default_rng(tid).integers(0, 256, 3 * _row_bytes(t), dtype=np.uint8).tobytes()
    f = open_gguf_bytes(build_gguf([ARCH], [RawTensor("blk.0.ffn_up.weight", (K, 3), tid, data),
                                            RawTensor("output_norm.weight", (K,), 0, bytes(4 * K))]), name="ok.gguf")
    info = f.tensors["blk.0.ffn_up.weight"]
    assert info.type_name.lower() == t and info.n_bytes == len(data)
    assert bytes(np.asarray(f.tensor_data("blk.0.ffn_up.weight")).reshape(-1).view(np.uint8)) == data


@pytest.mark.parametrize("t", LEGACY_AND_FLOAT)
def test_gguf_tensor_shape_claiming_more_rows_than_written_is_refused_by_name(t: str) -> None:
    """The last tensor's shape says 4 rows; 3 were written (a truncated file or a wrong shape)."""
    image = build_gguf([ARCH], [RawTensor("output.weight", (K, 4), TYPES[t][0], bytes(3 * _row_bytes(t)))])
    err = _refused(image, "short.gguf")
    assert "'output.weight'" in str(err) and "past the end of the file" in str(err)
    assert err.pointer == "tensor[0]/offset"


@pytest.mark.parametrize("t", LEGACY_AND_FLOAT)
def test_gguf_tensor_bigger_than_its_slot_is_refused_by_name(t: str) -> None:
    """The first tensor's type and shape imply 3 rows of bytes; the next tensor starts after 2."""
    tid = TYPES[t][0]
    written = 2 * _row_bytes(t)
    nxt = written + (-written) % 32
    image = build_gguf([ARCH], [RawTensor("blk.0.attn_q.weight", (K, 3), tid, bytes(written)),
                                RawTensor("blk.0.attn_k.weight", (K, 1), tid, bytes(_row_bytes(t)), offset=nxt)])
    err = _refused(image, "overlap.gguf")
    assert "'blk.0.attn_k.weight'" in str(err) and "'blk.0.attn_q.weight'" in str(err) and "overlaps" in str(err)
    assert err.pointer == "tensor[1]/offset"


@pytest.mark.parametrize("t", sorted(t for t in LEGACY_AND_FLOAT if TYPES[t][1] > 1))
def test_gguf_legacy_row_not_whole_blocks_is_refused_by_name(t: str) -> None:
    tid, qk, blk = TYPES[t]
    image = build_gguf([ARCH], [RawTensor("token_embd.weight", (K + qk // 2, 2), tid, bytes(2 * (K // qk + 1) * blk))])
    err = _refused(image, "rows.gguf")
    assert "'token_embd.weight'" in str(err) and f"not a multiple of the {t}" in str(err)
    assert err.pointer == "tensor[0]/dims"


@pytest.mark.parametrize("t", sorted(TYPES))
def test_gguf_tensor_smaller_than_its_data_region_is_refused_by_name(t: str) -> None:
    """4 rows of bytes were written but the type and shape say 2: the next tensor starts 2 rows too late."""
    tid = TYPES[t][0]
    rows = 4
    written = rows * _row_bytes(t)
    nxt = written + (-written) % 32
    image = build_gguf([ARCH], [RawTensor("blk.0.ffn_down.weight", (K, 2), tid, bytes(written)),
                                RawTensor("output_norm.weight", (K,), 0, bytes(4 * K), offset=nxt)])
    err = _refused(image, "gap.gguf")
    text = str(err)
    assert "'blk.0.ffn_down.weight'" in text and f"{2 * _row_bytes(t)} bytes by its type and shape" in text
    assert f"holds {nxt} bytes" in text and err.pointer == "tensor[0]/dims"
