"""GGUF reader: a K-quant tensor whose bytes disagree with its type and shape is refused, naming the tensor.

A GGUF tensor's byte size is implied by its type and shape (rows of K/256 blocks of 84 / 110 / 144 / 176 / 210
bytes for q2_K .. q6_K). Refused with a GGUFError that names the tensor and points at its field: data that
runs past the end of the file (a truncated file, or a shape claiming more blocks than were written), data
that would overlap the next tensor (the shape claims more bytes than the writer laid out), and a row length
that is not a whole number of 256-value blocks. A well-formed file of each type reads back exactly its bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelmap.errors import GGUFError
from kernelmap.gguf import open_gguf_bytes
from kernelmap.gguf.types import ValueType
from kernelmap.gguf.writer import KV, RawTensor, build_gguf

ARCH = KV("general.architecture", ValueType.STRING, "testarch")
KQUANTS = {"q2_k": (10, 84), "q3_k": (11, 110), "q4_k": (12, 144), "q5_k": (13, 176), "q6_k": (14, 210)}
SHAPE = (512, 3)  # 3 rows of 2 blocks


def _refused(image: bytes, name: str) -> GGUFError:
    with pytest.raises(GGUFError) as info:
        open_gguf_bytes(image, name=name)
    err = info.value
    assert "\n" not in err.line() and err.path == name
    return err


@pytest.mark.parametrize("t", sorted(KQUANTS))
def test_gguf_kquant_tensor_well_formed_reads_its_bytes(t: str) -> None:
    tid, blk = KQUANTS[t]
    data = np.random.default_rng(tid).integers(0, 256, 3 * 2 * blk, dtype=np.uint8).tobytes()
    f = open_gguf_bytes(build_gguf([ARCH], [RawTensor("blk.0.ffn_down.weight", SHAPE, tid, data)]), name="ok.gguf")
    info = f.tensors["blk.0.ffn_down.weight"]
    assert info.type_name.lower() == t and info.n_bytes == len(data)
    assert bytes(np.asarray(f.tensor_data("blk.0.ffn_down.weight")).reshape(-1)) == data


@pytest.mark.parametrize("t", sorted(KQUANTS))
def test_gguf_kquant_tensor_truncated_data_is_refused_by_name(t: str) -> None:
    tid, blk = KQUANTS[t]
    image = build_gguf([ARCH], [RawTensor("blk.0.ffn_down.weight", SHAPE, tid, bytes(3 * 2 * blk))])
    err = _refused(image[:-1], "trunc.gguf")
    assert "'blk.0.ffn_down.weight'" in str(err) and "past the end of the file" in str(err)
    assert err.pointer == "tensor[0]/offset"


@pytest.mark.parametrize("t", sorted(KQUANTS))
def test_gguf_kquant_shape_claiming_more_blocks_than_written_is_refused_by_name(t: str) -> None:
    """The last tensor's shape says 4 rows but the writer wrote 3 rows of blocks."""
    tid, blk = KQUANTS[t]
    image = build_gguf([ARCH], [RawTensor("output.weight", (512, 4), tid, bytes(3 * 2 * blk))])
    err = _refused(image, "short.gguf")
    assert "'output.weight'" in str(err) and "past the end of the file" in str(err)


@pytest.mark.parametrize("t", sorted(KQUANTS))
def test_gguf_kquant_tensor_bigger_than_its_slot_is_refused_by_name(t: str) -> None:
    """The first tensor's type and shape imply more bytes than lie before the next tensor."""
    tid, blk = KQUANTS[t]
    written = 2 * 2 * blk  # two rows written, three claimed
    nxt = written + (-written) % 32
    image = build_gguf([ARCH], [RawTensor("blk.0.attn_output.weight", SHAPE, tid, bytes(written)),
                                RawTensor("blk.0.ffn_down.weight", (512, 1), tid, bytes(2 * blk), offset=nxt)])
    err = _refused(image, "overlap.gguf")
    assert "'blk.0.ffn_down.weight'" in str(err) and "'blk.0.attn_output.weight'" in str(err)
    assert "overlaps" in str(err) and err.pointer == "tensor[1]/offset"


@pytest.mark.parametrize("t", sorted(KQUANTS))
def test_gguf_kquant_row_not_whole_blocks_is_refused_by_name(t: str) -> None:
    tid, blk = KQUANTS[t]
    image = build_gguf([ARCH], [RawTensor("blk.0.ffn_down.weight", (640, 2), tid, bytes(2 * 3 * blk))])
    err = _refused(image, "rows.gguf")
    assert "'blk.0.ffn_down.weight'" in str(err) and f"not a multiple of the {t}" in str(err)
    assert err.pointer == "tensor[0]/dims"
