"""GGUF reader fuzz: mutated images read by our reader and by gguf-py must agree (gguf_differential.py).

Every mutant is read in full by both readers. Accepted by both: the metadata keys, value types and
values and the tensor table (type, shape, element count, byte size, offset, bytes) must be equal.
Refused by one only: the difference must be an entry of the explicit allowed lists in
gguf_differential.py (each with its reason, and its evidence checked on the other reader's readout).
Only GGUFError may escape our reader, and no input may take more than 5 s. 10,000 mutants in
`make test`, 100,000 more in `make test-slow`; mutants are reproducible from the printed seed and index.
"""

from __future__ import annotations

import collections
import random
import signal
import struct

import pytest
from gguf_differential import ACCEPTED_BY_US_ONLY, REFUSED_BY_US_ONLY, Disagreement, Oracle, judge

from kernelmap.gguf.fuzz import exercise, mutate, random_ops, seed_images
from kernelmap.gguf.types import ValueType as V
from kernelmap.gguf.writer import KV, RawTensor, build_gguf

N_FAST = 10_000
N_SLOW = 100_000
MIN_BOTH_ACCEPT = 0.08  # the differential must compare real readouts, not only agree on refusals


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("one input took more than 5 s")


@pytest.fixture
def oracle(tmp_path):
    o = Oracle(str(tmp_path))
    yield o
    o.close()


def _campaign(n: int, seed: int, oracle: Oracle) -> collections.Counter:
    """n mutants of the seed images (a quarter of the mutants both readers accept join the corpus, up to 256)."""
    rng = random.Random(seed)
    corpus = seed_images()
    outcomes: collections.Counter = collections.Counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(n):
            base = rng.randrange(len(corpus))
            ops = random_ops(rng, len(corpus[base]))
            image = mutate(corpus[base], ops)
            signal.alarm(5)
            try:
                exercise(image)  # only GGUFError may escape our reader
                code = judge(image, oracle)
            except Disagreement as exc:
                raise AssertionError(f"mutant {i} of seed {seed} (corpus[{base}], ops {ops}): {exc}\n"
                                     f"image: {image.hex()}") from None
            finally:
                signal.alarm(0)
            outcomes[code] += 1
            if code == "both-accept" and len(corpus) < 256 and rng.random() < 0.25:
                corpus.append(image)
    finally:
        signal.signal(signal.SIGALRM, old)
    print(f"seed {seed}: {n} mutants: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    return outcomes


def _check(outcomes: collections.Counter, n: int) -> None:
    assert sum(outcomes.values()) == n
    assert outcomes["both-accept"] >= MIN_BOTH_ACCEPT * n, outcomes
    assert outcomes["both-refuse"] > 0, outcomes


def test_reader_fuzz_10k_mutants_agree_with_gguf_py(oracle):
    _check(_campaign(N_FAST, 0, oracle), N_FAST)


@pytest.mark.slow
def test_reader_fuzz_100k_mutants_agree_with_gguf_py(oracle):
    _check(_campaign(N_SLOW, 1, oracle), N_SLOW)


def test_reader_fuzz_seed_images_are_accepted_by_both_readers(oracle):
    seeds = seed_images()
    assert all(exercise(image) for image in seeds)
    codes = [judge(image, oracle) for image in seeds]
    assert codes.count("both-accept") >= len(seeds) - 1, codes  # one seed holds an unknown type id
    assert set(codes) <= {"both-accept", "unknown-type-kept"}, codes


def _image(*tensors: RawTensor, kvs: tuple[KV, ...] = ()) -> bytes:
    return build_gguf([KV("general.architecture", V.STRING, "x"), *kvs], list(tensors))


def _wrapping_offset() -> bytes:
    """A tensor whose offset plus the data start is 2^64: gguf-py's uint64 sum wraps to file offset 0."""
    probe = _image(RawTensor("t", (4,), 0, bytes(16), offset=0))
    start = len(probe) - 16
    return _image(RawTensor("t", (4,), 0, bytes(16), offset=2**64 - start))


def _big_endian() -> bytes:
    return b"GGUF" + struct.pack(">IQQ", 3, 0, 0)


# one hand-built image per allowed asymmetry: each entry is reachable and its evidence check holds
ASYMMETRY_EXAMPLES = {
    "key-control": _image(kvs=(KV("a\x01b", V.UINT8, 1),)),
    "name-control": _image(RawTensor("t\x1b[2J", (4,), 0)),
    "name-length": _image(RawTensor("n" * 64, (4,), 0)),
    "bool-not-0-1": _image(kvs=(KV("b", V.BOOL, 2),)),
    "nested-array": _image(kvs=(KV("a", V.ARRAY, [], V.ARRAY),)),
    "empty-array-bad-type": _image(kvs=(KV("a", V.ARRAY, [], 99),)),
    "alignment-range": _image(kvs=(KV("general.alignment", V.UINT32, 1 << 21),)),
    "n-dims": _image(RawTensor("t", (), 0, bytes(4))),
    "zero-dim": _image(RawTensor("t", (0,), 0, b"")),
    "misaligned-offset": _image(RawTensor("t", (4,), 0, bytes(32), offset=4)),
    "tensor-overlap": _image(RawTensor("a", (4,), 0, bytes(16), offset=0), RawTensor("b", (4,), 0, bytes(16), offset=0)),
    "tensor-gap": _image(RawTensor("a", (4,), 0, bytes(16), offset=0), RawTensor("b", (4,), 0, bytes(48), offset=64)),
    "offset-wraps": _wrapping_offset(),
    "big-endian": _big_endian(),
    "unknown-type-kept": _image(RawTensor("t", (4,), 99, bytes(16), offset=0)),
    "type-newer-than-kernelmap": _image(RawTensor("t", (32,), 40, bytes(64), offset=0)),
}


def test_reader_fuzz_every_allowed_asymmetry_has_an_example():
    assert set(ASYMMETRY_EXAMPLES) == {a.code for a in REFUSED_BY_US_ONLY + ACCEPTED_BY_US_ONLY}


@pytest.mark.parametrize("code", sorted(ASYMMETRY_EXAMPLES))
def test_reader_fuzz_allowed_asymmetry_is_judged_as_such(oracle, code):
    assert judge(ASYMMETRY_EXAMPLES[code], oracle) == code


def test_reader_fuzz_unexplained_difference_is_a_disagreement(oracle, monkeypatch):
    """Without its allowed-list entry, an overlap our reader refuses and gguf-py reads fails the fuzz test."""
    import gguf_differential

    kept = tuple(a for a in REFUSED_BY_US_ONLY if a.code != "tensor-overlap")
    monkeypatch.setattr(gguf_differential, "REFUSED_BY_US_ONLY", kept)
    with pytest.raises(Disagreement, match="overlaps"):
        judge(ASYMMETRY_EXAMPLES["tensor-overlap"], oracle)
