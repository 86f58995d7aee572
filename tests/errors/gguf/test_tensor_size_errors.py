"""A tensor whose byte size disagrees with its type and shape is refused by name (issue 13, bad input).

GGUF stores no byte size: a tensor's size is its type's block bytes times its shape, and its data region runs
from its offset to the next tensor's (padded to the alignment), as llama.cpp's loader requires. A retyped or
reshaped tensor therefore either overlaps the next tensor, runs past the end of the file, or leaves more bytes
than it needs before the next tensor; each is a GGUFError whose one line names the tensor.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelmap.errors import GGUFError
from kernelmap.gguf import open_gguf_bytes
from kernelmap.gguf.types import ValueType
from kernelmap.gguf.writer import KV, RawTensor, build_gguf

ARCH = KV("general.architecture", ValueType.STRING, "testarch")
F32, Q4_0, Q8_0 = 0, 2, 8
Q4_0_BYTES = 2 * 18  # [64, 1]: two blocks
Q8_0_BYTES = 2 * 34

CASES = [
    # (case id, tensors, tensor the message must name, message fragment)
    ("q8_0_declared_q4_0_bytes_stored", [RawTensor("blk.0.w", (64, 1), Q8_0, data=bytes(Q4_0_BYTES)),
                                         RawTensor("blk.1.w", (64,), F32)], "blk.0.w", "overlaps"),
    ("q4_0_declared_q8_0_bytes_stored", [RawTensor("blk.0.w", (64, 1), Q4_0, data=bytes(Q8_0_BYTES)),
                                         RawTensor("blk.1.w", (64,), F32)], "blk.0.w", "data region"),
    ("shape_too_small_for_region", [RawTensor("blk.0.w", (32, 1), Q8_0, data=bytes(4 * 34)),
                                    RawTensor("blk.1.w", (64,), F32)], "blk.0.w", "data region"),
    ("last_tensor_larger_than_file", [RawTensor("blk.0.w", (64,), F32),
                                      RawTensor("blk.1.w", (64, 1), Q8_0, data=bytes(Q4_0_BYTES))],
     "blk.1.w", "past the end of the file"),
]


@pytest.mark.parametrize("case_id,tensors,name,fragment", CASES, ids=[c[0] for c in CASES])
def test_reader_tensor_size_disagreeing_with_type_and_shape_is_refused_by_name(case_id, tensors, name, fragment):
    with pytest.raises(GGUFError) as info:
        open_gguf_bytes(build_gguf([ARCH], tensors), name=f"{case_id}.gguf")
    line = info.value.line()
    assert fragment in line and repr(name) in line, line
    assert info.value.path == f"{case_id}.gguf" and "\n" not in line


def test_reader_tightly_packed_tensors_of_every_size_open():
    """The check refuses only disagreement: padded, consecutive tensors of mixed types open."""
    tensors = [RawTensor("a", (64, 1), Q4_0), RawTensor("b", (64, 3), Q8_0), RawTensor("c", (7,), F32),
               RawTensor("d", (64, 1), Q4_0)]
    f = open_gguf_bytes(build_gguf([ARCH], tensors), name="packed.gguf")
    assert [f.tensors[t.name].n_bytes for t in tensors] == [36, 204, 28, 36]


def test_cli_refuses_model_with_mis_sized_tensor_in_one_line(tmp_path):
    path = tmp_path / "retyped.gguf"
    path.write_bytes(build_gguf([ARCH], CASES[1][1]))
    res = subprocess.run([sys.executable, "-m", "kernelmap", "inspect", str(path)], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 1, res.stderr
    first = res.stderr.strip().splitlines()[0]
    assert "'blk.0.w'" in first and "data region" in first and "Traceback" not in res.stderr
