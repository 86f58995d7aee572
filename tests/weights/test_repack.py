"""Repacked weight layouts (weights/repack.py): the "q32_r8", "q8_0_c16", "iq4_nl_c16", "q4_k_c16", "q2_k_c16", "q3_k_c16" and "q6_k_c16"
bytes as its
docstring states them, the inverse,
the fail-closed shape checks, and the packer writing a repacked copy beside the GGUF-mapped original."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from kernelmap.errors import ModelError
from kernelmap.gguf import open_gguf
from kernelmap.gguf.writer import RawTensor, build_gguf
from kernelmap.weights import (
    WeightNeed,
    check_manifest,
    load_manifest,
    map_weights,
    pack_weights,
    weight_name,
)
from kernelmap.weights.repack import derivable, layout_nbytes, repack, shape_error, unpack

BLOCK = {"q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24}
FIELDS = {"q4_0": ((0,), None, 2), "q4_1": ((0, 2), None, 4), "q5_0": ((0,), 2, 6), "q5_1": ((0, 2), 4, 8)}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELMAP_CACHE", str(tmp_path / "cache"))


def _codes(blk: np.ndarray, dtype: str) -> list[int]:
    """The 32 codes of one plain block (ggml order: low nibbles, then high nibbles; fifth bit from qh)."""
    _halves, qh_at, qs_at = FIELDS[dtype]
    qs = blk[qs_at:qs_at + 16]
    qh = int.from_bytes(blk[qh_at:qh_at + 4].tobytes(), "little") if qh_at is not None else 0
    return [int(qs[i % 16] >> (4 * (i // 16)) & 15) | ((qh >> i) & 1) << 4 for i in range(32)]


@pytest.mark.parametrize("dtype", sorted(BLOCK))
def test_q32_r8_bytes_are_the_documented_layout(dtype):
    n, nb = 11, 6  # two groups (the second with 5 pad rows), three tiles
    k = nb * 32
    rng = np.random.default_rng(1)
    plain = rng.integers(0, 256, size=(n, nb, BLOCK[dtype]), dtype=np.uint8)
    out = repack("q32_r8", dtype, plain.reshape(-1), (k, n))
    tile = 16 * BLOCK[dtype]
    assert out.size == 2 * nb // 2 * tile == layout_nbytes("q32_r8", dtype, (k, n), plain.size)
    tiles = out.reshape(2, nb // 2, tile)
    halves, qh_at, _ = FIELDS[dtype]
    for row in range(16):
        g, r = divmod(row, 8)
        for b in range(nb):
            t, p = tiles[g, b // 2], b % 2
            blk = plain[row, b] if row < n else np.zeros(BLOCK[dtype], np.uint8)
            for f, off in enumerate(halves):  # each fp16 field: 32 bytes, block 2j's 8 rows then block 2j + 1's
                at = 32 * f + 16 * p + 2 * r
                assert t[at:at + 2].tobytes() == blk[off:off + 2].tobytes()
            nib = t[tile - 256 + 32 * r:tile - 256 + 32 * r + 32]
            fifth = t[32 * len(halves) + 32 * p:32 * len(halves) + 32 * p + 32] if qh_at is not None else None
            got = [int(nib[i] >> (4 * p) & 15) | (int(fifth[i] >> r & 1) << 4 if fifth is not None else 0)
                   for i in range(32)]
            assert got == _codes(blk, dtype), (row, b)


@pytest.mark.parametrize("dtype", sorted(BLOCK))
@pytest.mark.parametrize("n,k", [(1, 64), (7, 128), (8, 64), (9, 640), (17, 2048), (0, 64)])
def test_q32_r8_unpack_inverts_repack(dtype, n, k):
    rng = np.random.default_rng(n * 1000 + k)
    plain = rng.integers(0, 256, size=n * k // 32 * BLOCK[dtype], dtype=np.uint8)
    packed = repack("q32_r8", dtype, plain, (k, n))
    assert packed.size == layout_nbytes("q32_r8", dtype, (k, n), plain.size)
    assert np.array_equal(unpack("q32_r8", dtype, packed, (k, n)), plain)


def test_q32_r8_refuses_what_it_cannot_hold():
    assert shape_error("q32_r8", "q5_0", (640, 3)) is None
    assert "multiple of 64" in shape_error("q32_r8", "q5_0", (96, 3))
    assert "multiple of 64" in shape_error("q32_r8", "q5_0", (64, 3, 2))
    assert "not q8_0" in shape_error("q32_r8", "q8_0", (64, 3))
    with pytest.raises(ValueError, match="multiple of 64"):
        repack("q32_r8", "q5_0", bytes(3 * 22), (32, 3))
    assert derivable("q32_r8", "ggml_blocks", "q5_0") and not derivable("q32_r8", "ggml_blocks", "q4_k")
    assert not derivable("q32_r8", "row_major", "q5_0") and not derivable("ggml_blocks", "ggml_blocks", "q5_0")


def test_q8_0_c16_bytes_are_the_documented_layout():
    n, nb = 19, 3  # two groups (the second with 13 pad rows); 3 blocks: the scale area is 96 bytes padded to 128
    rng = np.random.default_rng(2)
    plain = rng.integers(0, 256, size=(n, nb, 34), dtype=np.uint8)
    out = repack("q8_0_c16", "q8_0", plain.reshape(-1), (nb * 32, n))
    s = 128
    assert out.size == 2 * (s + 512 * nb) == layout_nbytes("q8_0_c16", "q8_0", (nb * 32, n), plain.size)
    groups = out.reshape(2, s + 512 * nb)
    assert not groups[:, 32 * nb:s].any()  # the scale area's padding
    for row in range(32):
        g, c = divmod(row, 16)
        for b in range(nb):
            blk = plain[row, b] if row < n else None
            d = groups[g, 32 * b + 2 * c:32 * b + 2 * c + 2]
            codes = [int(groups[g, s + 512 * b + 64 * (i // 4) + 4 * c + i % 4]) for i in range(32)]
            if blk is None:  # pad rows: zero bytes
                assert not d.any() and not any(codes), (row, b)
                continue
            assert d.tobytes() == blk[0:2].tobytes(), (row, b)
            assert codes == [int(v) ^ 0x80 for v in blk[2:]], (row, b)  # the int8 with its sign bit flipped


@pytest.mark.parametrize("n,k", [(1, 32), (15, 96), (16, 640), (17, 64), (40, 2048), (0, 32)])
def test_q8_0_c16_unpack_inverts_repack(n, k):
    rng = np.random.default_rng(n * 1000 + k)
    plain = rng.integers(0, 256, size=n * k // 32 * 34, dtype=np.uint8)
    packed = repack("q8_0_c16", "q8_0", plain, (k, n))
    assert packed.size == layout_nbytes("q8_0_c16", "q8_0", (k, n), plain.size)
    assert np.array_equal(unpack("q8_0_c16", "q8_0", packed, (k, n)), plain)


def test_iq4_nl_c16_bytes_are_the_documented_layout():
    n, nb = 19, 3  # two groups (the second with 13 pad rows); the scale area is 96 bytes padded to 128
    rng = np.random.default_rng(3)
    plain = rng.integers(0, 256, size=(n, nb, 18), dtype=np.uint8)
    out = repack("iq4_nl_c16", "iq4_nl", plain.reshape(-1), (nb * 32, n))
    s = 128
    assert out.size == 2 * (s + 256 * nb) == layout_nbytes("iq4_nl_c16", "iq4_nl", (nb * 32, n), plain.size)
    groups = out.reshape(2, s + 256 * nb)
    assert not groups[:, 32 * nb:s].any()
    for row in range(32):
        g, c = divmod(row, 16)
        for b in range(nb):
            d = groups[g, 32 * b + 2 * c:32 * b + 2 * c + 2]
            qs = [int(groups[g, s + 256 * b + 64 * (i // 4) + 4 * c + i % 4]) for i in range(16)]
            if row >= n:  # pad rows: zero bytes
                assert not d.any() and not any(qs), (row, b)
                continue
            assert d.tobytes() == plain[row, b, 0:2].tobytes() and qs == plain[row, b, 2:].tolist(), (row, b)


@pytest.mark.parametrize("n,k", [(1, 32), (15, 96), (16, 640), (17, 64), (40, 2048), (0, 32)])
def test_iq4_nl_c16_unpack_inverts_repack(n, k):
    rng = np.random.default_rng(n * 1000 + k + 7)
    plain = rng.integers(0, 256, size=n * k // 32 * 18, dtype=np.uint8)
    packed = repack("iq4_nl_c16", "iq4_nl", plain, (k, n))
    assert packed.size == layout_nbytes("iq4_nl_c16", "iq4_nl", (k, n), plain.size)
    assert np.array_equal(unpack("iq4_nl_c16", "iq4_nl", packed, (k, n)), plain)
    assert "holds iq4_nl, not q4_0" in shape_error("iq4_nl_c16", "q4_0", (64, 3))
    assert "multiple of 32" in shape_error("iq4_nl_c16", "iq4_nl", (48, 3))
    assert derivable("iq4_nl_c16", "ggml_blocks", "iq4_nl") and not derivable("iq4_nl_c16", "ggml_blocks", "q4_0")


def test_q8_0_c16_refuses_what_it_cannot_hold():
    assert shape_error("q8_0_c16", "q8_0", (32, 3)) is None
    assert "holds q8_0, not q4_0" in shape_error("q8_0_c16", "q4_0", (64, 3))
    assert "multiple of 32" in shape_error("q8_0_c16", "q8_0", (48, 3))
    assert "multiple of 32" in shape_error("q8_0_c16", "q8_0", (32, 3, 2))
    with pytest.raises(ValueError, match="multiple of 32"):
        repack("q8_0_c16", "q8_0", bytes(34), (16, 1))
    assert derivable("q8_0_c16", "ggml_blocks", "q8_0") and not derivable("q8_0_c16", "ggml_blocks", "q4_0")


def test_q4_k_c16_bytes_are_the_documented_layout():
    from kernelmap.weights.repack import _q4k_scales

    n, nb = 19, 2  # two groups (the second with 13 pad rows)
    rng = np.random.default_rng(3)
    plain = rng.integers(0, 256, size=(n, nb, 144), dtype=np.uint8)
    out = repack("q4_k_c16", "q4_k", plain.reshape(-1), (nb * 256, n))
    assert out.size == 2 * nb * 2368 == layout_nbytes("q4_k_c16", "q4_k", (nb * 256, n), plain.size)
    recs = out.reshape(2, nb, 2368)
    for row in range(32):
        g, c = divmod(row, 16)
        for b in range(nb):
            r = recs[g, b]
            qs = b"".join(r[64 * v + 4 * c:64 * v + 4 * c + 4].tobytes() for v in range(32))
            sc, mn = r[2048 + c:2176:16], r[2176 + c:2304:16]
            d, dmin = r[2304 + 2 * c:2306 + 2 * c], r[2336 + 2 * c:2338 + 2 * c]
            if row >= n:  # pad rows: zero bytes
                assert not any(qs) and not sc.any() and not mn.any() and not d.any() and not dmin.any(), (row, b)
                continue
            blk = plain[row, b]
            assert qs == blk[16:].tobytes(), (row, b)
            want_sc, want_mn = _q4k_scales(blk[4:16])
            assert sc.tolist() == want_sc.tolist() and mn.tolist() == want_mn.tolist(), (row, b)
            assert d.tobytes() == blk[0:2].tobytes() and dmin.tobytes() == blk[2:4].tobytes(), (row, b)


def test_q4_k_c16_scales_are_llamas_six_bit_unpacking():
    """_q4k_scales states km_q4k_scales (kernels/common/km_kquant.h): sc[0..3] / mn[0..3] the low 6 bits of bytes
    0-3 / 4-7, sc[4..7] / mn[4..7] the low / high nibbles of bytes 8-11 with the top 2 bits of bytes 0-3 / 4-7."""
    from kernelmap.weights.repack import _q4k_pack_scales, _q4k_scales

    q = np.array([0b11000001, 0b01000010, 3, 4, 0b10000101, 6, 7, 0b11001000, 0x9A, 0xBC, 0xDE, 0xF0], np.uint8)
    sc, mn = _q4k_scales(q)
    assert sc.tolist() == [1, 2, 3, 4, 0x0A | 0x30, 0x0C | 0x10, 0x0E, 0x00]
    assert mn.tolist() == [5, 6, 7, 8, 0x09 | 0x20, 0x0B, 0x0D, 0x0F | 0x30]
    table = np.random.default_rng(5).integers(0, 256, size=(200, 12), dtype=np.uint8)
    assert np.array_equal(_q4k_pack_scales(*_q4k_scales(table)), table)


@pytest.mark.parametrize("n,k", [(1, 256), (8, 512), (16, 256), (17, 768), (40, 2048), (0, 256)])
def test_q4_k_c16_unpack_inverts_repack(n, k):
    rng = np.random.default_rng(n * 1000 + k)
    plain = rng.integers(0, 256, size=n * k // 256 * 144, dtype=np.uint8)
    packed = repack("q4_k_c16", "q4_k", plain, (k, n))
    assert packed.size == layout_nbytes("q4_k_c16", "q4_k", (k, n), plain.size)
    assert np.array_equal(unpack("q4_k_c16", "q4_k", packed, (k, n)), plain)


def test_q4_k_c16_refuses_what_it_cannot_hold():
    assert shape_error("q4_k_c16", "q4_k", (256, 3)) is None
    assert "holds q4_k, not q5_k" in shape_error("q4_k_c16", "q5_k", (256, 3))
    assert "multiple of 256" in shape_error("q4_k_c16", "q4_k", (128, 3))
    assert "multiple of 256" in shape_error("q4_k_c16", "q4_k", (256, 3, 2))
    with pytest.raises(ValueError, match="multiple of 256"):
        repack("q4_k_c16", "q4_k", bytes(144), (128, 1))
    assert derivable("q4_k_c16", "ggml_blocks", "q4_k") and not derivable("q4_k_c16", "ggml_blocks", "q8_0")


def test_q2_k_c16_bytes_are_the_documented_layout():
    n, nb = 19, 2  # two groups (the second with 13 pad rows)
    rng = np.random.default_rng(6)
    plain = rng.integers(0, 256, size=(n, nb, 84), dtype=np.uint8)
    out = repack("q2_k_c16", "q2_k", plain.reshape(-1), (nb * 256, n))
    assert out.size == 2 * nb * 1344 == layout_nbytes("q2_k_c16", "q2_k", (nb * 256, n), plain.size)
    recs = out.reshape(2, nb, 1344)
    for row in range(32):
        g, c = divmod(row, 16)
        for b in range(nb):
            r = recs[g, b]
            qs = b"".join(r[64 * v + 4 * c:64 * v + 4 * c + 4].tobytes() for v in range(16))
            scales = r[1024 + c:1280:16].tobytes()
            d, dmin = r[1280 + 2 * c:1282 + 2 * c].tobytes(), r[1312 + 2 * c:1314 + 2 * c].tobytes()
            blk = plain[row, b].tobytes() if row < n else bytes(84)  # pad rows: zero bytes
            assert (scales, qs, d, dmin) == (blk[:16], blk[16:80], blk[80:82], blk[82:84]), (row, b)


@pytest.mark.parametrize("n,k", [(1, 256), (8, 512), (16, 256), (17, 768), (40, 2048), (0, 256)])
def test_q2_k_c16_unpack_inverts_repack(n, k):
    rng = np.random.default_rng(n * 1000 + k + 1)
    plain = rng.integers(0, 256, size=n * k // 256 * 84, dtype=np.uint8)
    packed = repack("q2_k_c16", "q2_k", plain, (k, n))
    assert packed.size == layout_nbytes("q2_k_c16", "q2_k", (k, n), plain.size)
    assert np.array_equal(unpack("q2_k_c16", "q2_k", packed, (k, n)), plain)
    assert "holds q2_k, not q4_k" in shape_error("q2_k_c16", "q4_k", (256, 3))
    assert "multiple of 256" in shape_error("q2_k_c16", "q2_k", (128, 3))


def _q3k_scales_ref(sc12: bytes) -> list[int]:
    """km_kquant.h's q3_K scale rule, scalar: scale j's low 4 bits nibble j // 8 of byte j % 8, its top 2 bits bits
    2 (j // 4) of byte 8 + j % 4; signed = stored - 32."""
    out = []
    for j in range(16):
        low = sc12[j % 8] & 0x0F if j < 8 else sc12[j % 8] >> 4
        top = (sc12[8 + j % 4] >> (2 * (j // 4))) & 3
        out.append((low | top << 4) - 32)
    return out


def test_q3_k_c16_bytes_are_the_documented_layout():
    n, nb = 19, 2  # two groups (the second with 13 pad rows)
    rng = np.random.default_rng(7)
    plain = rng.integers(0, 256, size=(n, nb, 110), dtype=np.uint8)
    out = repack("q3_k_c16", "q3_k", plain.reshape(-1), (nb * 256, n))
    assert out.size == 2 * nb * 1824 == layout_nbytes("q3_k_c16", "q3_k", (nb * 256, n), plain.size)
    recs = out.reshape(2, nb, 1824)
    for row in range(32):
        g, c = divmod(row, 16)
        for b in range(nb):
            r = recs[g, b]
            qs = b"".join(r[64 * v + 4 * c:64 * v + 4 * c + 4].tobytes() for v in range(16))
            hmask = b"".join(r[1024 + 64 * t + 4 * c:1024 + 64 * t + 4 * c + 4].tobytes() for t in range(8))
            scales = r[1536 + c:1792:16].view(np.int8).tolist()
            d = r[1792 + 2 * c:1794 + 2 * c].tobytes()
            blk = plain[row, b].tobytes() if row < n else bytes(110)  # pad rows: zero bytes
            assert (hmask, qs, d) == (blk[:32], blk[32:96], blk[108:110]), (row, b)
            assert scales == _q3k_scales_ref(blk[96:108]), (row, b)


@pytest.mark.parametrize("n,k", [(1, 256), (8, 512), (16, 256), (17, 768), (40, 2048), (0, 256)])
def test_q3_k_c16_unpack_inverts_repack(n, k):
    rng = np.random.default_rng(n * 1000 + k + 2)
    plain = rng.integers(0, 256, size=n * k // 256 * 110, dtype=np.uint8)
    packed = repack("q3_k_c16", "q3_k", plain, (k, n))
    assert packed.size == layout_nbytes("q3_k_c16", "q3_k", (k, n), plain.size)
    assert np.array_equal(unpack("q3_k_c16", "q3_k", packed, (k, n)), plain)
    assert "holds q3_k, not q2_k" in shape_error("q3_k_c16", "q2_k", (256, 3))
    assert "multiple of 256" in shape_error("q3_k_c16", "q3_k", (128, 3))
    assert derivable("q3_k_c16", "ggml_blocks", "q3_k") and not derivable("q3_k_c16", "ggml_blocks", "q2_k")


def test_q6_k_c16_bytes_are_the_documented_layout():
    n, nb = 21, 2  # two groups (the second with 11 pad rows)
    rng = np.random.default_rng(8)
    plain = rng.integers(0, 256, size=(n, nb, 210), dtype=np.uint8)
    out = repack("q6_k_c16", "q6_k", plain.reshape(-1), (nb * 256, n))
    assert out.size == 2 * nb * 3360 == layout_nbytes("q6_k_c16", "q6_k", (nb * 256, n), plain.size)
    recs = out.reshape(2, nb, 3360)
    for row in range(32):
        g, c = divmod(row, 16)
        for b in range(nb):
            r = recs[g, b]
            ql = b"".join(r[64 * v + 4 * c:64 * v + 4 * c + 4].tobytes() for v in range(32))
            qh = b"".join(r[2048 + 64 * t + 4 * c:2048 + 64 * t + 4 * c + 4].tobytes() for t in range(16))
            scales = b"".join(r[3072 + 32 * s + 2 * c:3072 + 32 * s + 2 * c + 2].tobytes() for s in range(8))
            d = r[3328 + 2 * c:3330 + 2 * c].tobytes()
            blk = plain[row, b].tobytes() if row < n else bytes(210)  # pad rows: zero bytes
            assert (ql, qh, scales, d) == (blk[:128], blk[128:192], blk[192:208], blk[208:210]), (row, b)


@pytest.mark.parametrize("n,k", [(1, 256), (8, 512), (16, 256), (17, 768), (40, 2048), (0, 256)])
def test_q6_k_c16_unpack_inverts_repack(n, k):
    rng = np.random.default_rng(n * 1000 + k + 3)
    plain = rng.integers(0, 256, size=n * k // 256 * 210, dtype=np.uint8)
    packed = repack("q6_k_c16", "q6_k", plain, (k, n))
    assert packed.size == layout_nbytes("q6_k_c16", "q6_k", (k, n), plain.size) == -(-n // 16) * 16 * plain.size // max(n, 1)
    assert np.array_equal(unpack("q6_k_c16", "q6_k", packed, (k, n)), plain)
    assert "holds q6_k, not q4_k" in shape_error("q6_k_c16", "q4_k", (256, 3))
    assert "multiple of 256" in shape_error("q6_k_c16", "q6_k", (128, 3))
    assert "multiple of 256" in shape_error("q6_k_c16", "q6_k", (256, 3, 2))
    assert derivable("q6_k_c16", "ggml_blocks", "q6_k") and not derivable("q6_k_c16", "ggml_blocks", "q3_k")


@pytest.fixture
def q5_model(tmp_path):
    rng = np.random.default_rng(4)
    tensors = [RawTensor("blk.0.ffn_up.weight", (128, 10), 6, rng.integers(0, 256, 10 * 4 * 22, np.uint8).tobytes()),
               RawTensor("blk.0.attn_q.weight", (96, 3), 6, rng.integers(0, 256, 3 * 3 * 22, np.uint8).tobytes())]
    path = tmp_path / "q5.gguf"
    path.write_bytes(build_gguf([], tensors))
    return path


def test_pack_writes_a_repacked_copy_beside_the_mapped_original(q5_model, tmp_path):
    out = tmp_path / "w"
    needs = [WeightNeed("up", "blk.0.ffn_up.weight", "q5_0", "ggml_blocks"),
             WeightNeed(weight_name("up", "q32_r8"), "blk.0.ffn_up.weight", "q5_0", "q32_r8", (128, 10))]
    with open_gguf(q5_model) as g:
        manifest = pack_weights(g, needs, out)
        plain = g.tensor_data("blk.0.ffn_up.weight").tobytes()
    mapped, packed = manifest.entry("up"), manifest.entry("up__q32_r8")
    assert mapped.file == "gguf" and packed.file == "weights.bin"
    assert packed.size == 16 * 4 * 22 and packed.offset % 64 == 0
    loaded = load_manifest(out / "weights.json")
    check_manifest(loaded, needs)
    data = map_weights(loaded, q5_model)
    want = repack("q32_r8", "q5_0", plain, (128, 10))
    assert np.array_equal(data["up__q32_r8"], want) and data["up"].tobytes() == plain
    assert packed.sha256 == hashlib.sha256(want.tobytes()).hexdigest()


def test_pack_refuses_a_repacked_layout_the_shape_cannot_take_before_writing(q5_model, tmp_path):
    out = tmp_path / "w"
    with open_gguf(q5_model) as g, pytest.raises(ModelError, match="multiple of 64") as err:
        pack_weights(g, [WeightNeed("q", "blk.0.attn_q.weight", "q5_0", "q32_r8")], out)
    assert "needs[0]/layout" in str(err.value)
    assert not (out / "weights.json").exists()


def test_manifest_refuses_a_repacked_entry_of_the_wrong_size(q5_model, tmp_path):
    import json

    out = tmp_path / "w"
    with open_gguf(q5_model) as g:
        pack_weights(g, [WeightNeed("up", "blk.0.ffn_up.weight", "q5_0", "q32_r8")], out)
    doc = json.loads((out / "weights.json").read_text())
    doc["entries"][0]["size"] = 10 * 4 * 22  # the GGUF layout's size, not the padded repacked one
    (out / "weights.json").write_text(json.dumps(doc))
    with pytest.raises(ModelError, match="size does not match its dtype, shape and layout"):
        load_manifest(out / "weights.json")


def test_every_repacked_layout_is_in_the_schemas_that_name_layouts():
    """A layout the packer makes must be one a kernel map's port and a weights manifest may name."""
    import json
    from pathlib import Path

    import kernelmap
    from kernelmap.weights.repack import REPACKED

    root = Path(kernelmap.__file__).parent
    maps = json.loads((root / "maps" / "kernel_map.schema.json").read_text())
    manifest = json.loads((root / "weights" / "weights_manifest.schema.json").read_text())

    def enums(doc, key="layout"):
        if isinstance(doc, dict):
            for k, v in doc.items():
                if k == key and isinstance(v, dict) and "enum" in v:
                    yield set(v["enum"])
                yield from enums(v, key)
        elif isinstance(doc, list):
            for v in doc:
                yield from enums(v, key)

    for name, doc in (("kernel_map.schema.json", maps), ("weights_manifest.schema.json", manifest)):
        found = list(enums(doc))
        assert found, name
        assert all(set(REPACKED) <= e for e in found), (name, found)
