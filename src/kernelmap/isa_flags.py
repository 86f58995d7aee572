"""The ISA flag table: every compiler flag a kernel-map variant may use, and the CPU features each implies.

Input: nothing (this module is data plus small lookups). Output: per architecture, the allowed flags
(`-mavx2`, `-march=armv8.2-a+dotprod`, ...), the features each one enables, the feature implication
graph, and how the generated program's start-up check tests each feature. The map loader refuses a
flag outside this table, refuses flags that change floating-point arithmetic, and checks a variant's
`requires` against what its flags imply; the compiler completes the start-up check from it. It does
not read the host CPU (target.py does) nor choose variants (the resolver does).

Implications follow the compilers: a feature implies what gcc (12: `gcc -m... -dM -E`) or clang
(LLVM's X86 feature graph) switch on with it, the union of both, since $CC may be either. So
`-mavx512f` implies avx2 (gcc) and fma, f16c (clang); `-mavx512fp16` implies avx512bw (gcc) and
avx512vl, avx512dq (clang; its xmm/ymm forms are EVEX.VL encodings). tests/target/test_isa_flags.py
checks the table against the macros the installed gcc (and aarch64 cross gcc) defines.

Feature names are the Linux /proc/cpuinfo spellings. A feature is either *listed* (a variant whose
flags imply it must name it in `requires`: the resolver selects on these) or *incidental* (implied
lower-level features every CPU of the listed levels has, e.g. the SSE family and AVX under -mavx2, or
the Armv8.1 atomics under an Armv8.2 -march). Incidental features need not be listed unless a flag
of the variant enables them by name (`-mavx` enables avx); the start-up check tests them all
(`variant_features`). x86-64's sse and sse2 are the architecture's baseline and never checked.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ARCHES",
    "CPU_SUPPORTS",
    "FEATURES",
    "FLAGS",
    "Feature",
    "Flag",
    "KNOWN_FEATURES",
    "arithmetic_flag",
    "closure",
    "enabling_flag",
    "implied_by",
    "variant_features",
]

ARCHES = ("x86_64", "aarch64")


@dataclass(frozen=True)
class Feature:
    """A CPU feature: its arch, how the start-up check tests it, what it implies, and whether maps list it."""

    name: str  # Linux /proc/cpuinfo spelling
    arch: str
    check: str  # x86_64: gcc __builtin_cpu_supports name; aarch64: <asm/hwcap.h> constant
    implies: tuple[str, ...]  # directly implied features (the closure follows them)
    listed: bool  # a variant whose flags imply it must list it in requires


@dataclass(frozen=True)
class Flag:
    """An allowed compiler flag: the features it names (always listed) and extra incidental ones."""

    flag: str
    arch: str
    enables: tuple[str, ...]
    also: tuple[str, ...] = ()  # architecture-version features a -march value brings besides `enables`


def _features(arch: str, rows: dict[str, tuple[str, tuple[str, ...], bool]]) -> dict[str, Feature]:
    return {name: Feature(name, arch, check, implies, listed) for name, (check, implies, listed) in rows.items()}


# name: (start-up check spelling, directly implied features, listed)
_X86 = _features("x86_64", {
    "pni": ("sse3", (), False),  # SSE3 (Linux calls it pni)
    "ssse3": ("ssse3", ("pni",), False),
    "sse4_1": ("sse4.1", ("ssse3",), False),
    "sse4_2": ("sse4.2", ("sse4_1", "popcnt"), False),  # gcc: -msse4.2 also enables popcnt and crc32
    "popcnt": ("popcnt", (), False),
    "xsave": ("xsave", (), False),
    "avx": ("avx", ("sse4_2", "xsave"), False),
    "avx2": ("avx2", ("avx",), True),
    "fma": ("fma", ("avx",), True),
    "f16c": ("f16c", ("avx",), True),
    "bmi1": ("bmi", (), True),
    "bmi2": ("bmi2", (), True),
    "avx512f": ("avx512f", ("avx2", "fma", "f16c"), True),
    "avx512bw": ("avx512bw", ("avx512f",), True),
    "avx512vl": ("avx512vl", ("avx512f",), True),
    "avx512dq": ("avx512dq", ("avx512f",), True),
    "avx512cd": ("avx512cd", ("avx512f",), True),
    "avx512_vnni": ("avx512vnni", ("avx512f",), True),
    "avx512_bf16": ("avx512bf16", ("avx512bw",), True),
    "avx512vbmi": ("avx512vbmi", ("avx512bw",), True),
    "avx512_vbmi2": ("avx512vbmi2", ("avx512bw",), True),
    "avx512ifma": ("avx512ifma", ("avx512f",), True),
    "avx512_bitalg": ("avx512bitalg", ("avx512bw",), True),
    "avx512_vpopcntdq": ("avx512vpopcntdq", ("avx512f",), True),
    "avx512_fp16": ("avx512fp16", ("avx512bw", "avx512vl", "avx512dq"), True),
    "avx_vnni": ("avxvnni", ("avx2",), True),
    # AMX: the start-up check tests the CPU bits; Linux also wants arch_prctl(ARCH_REQ_XCOMP_PERM)
    # before the first tile instruction, which an AMX kernel's runtime must add.
    "amx_tile": ("amx-tile", ("xsave",), True),
    "amx_int8": ("amx-int8", ("amx_tile",), True),
    "amx_bf16": ("amx-bf16", ("amx_tile",), True),
})

_ARM = _features("aarch64", {
    "fp": ("HWCAP_FP", (), False),
    "asimd": ("HWCAP_ASIMD", ("fp",), True),
    "asimdrdm": ("HWCAP_ASIMDRDM", ("asimd",), False),  # Armv8.1 (gcc: __ARM_FEATURE_QRDMX)
    "atomics": ("HWCAP_ATOMICS", (), False),  # Armv8.1 LSE
    "crc32": ("HWCAP_CRC32", (), False),
    "fcma": ("HWCAP_FCMA", ("asimd",), False),  # Armv8.3
    "jscvt": ("HWCAP_JSCVT", ("fp",), False),  # Armv8.3
    "lrcpc": ("HWCAP_LRCPC", (), False),  # Armv8.3 (gcc emits LDAPR for acquire loads)
    "frint": ("HWCAP2_FRINT", ("fp",), False),  # Armv8.5
    "fphp": ("HWCAP_FPHP", ("fp",), True),
    "asimdhp": ("HWCAP_ASIMDHP", ("asimd", "fphp"), True),
    "asimddp": ("HWCAP_ASIMDDP", ("asimd",), True),
    "i8mm": ("HWCAP2_I8MM", ("asimd",), True),
    "bf16": ("HWCAP2_BF16", ("asimd",), True),
    "sve": ("HWCAP_SVE", ("asimd", "fphp", "asimdhp"), True),  # gcc: +sve implies +fp16
    "sve2": ("HWCAP2_SVE2", ("sve",), True),
})

FEATURES: dict[str, Feature] = {**_X86, **_ARM}

_V81 = ("atomics", "crc32", "asimdrdm")  # mandatory from Armv8.1, so part of any armv8.2-a -march
FLAGS: dict[str, Flag] = {f.flag: f for f in (
    Flag("-mavx", "x86_64", ("avx",)),
    Flag("-mavx2", "x86_64", ("avx2",)),
    Flag("-mfma", "x86_64", ("fma",)),
    Flag("-mf16c", "x86_64", ("f16c",)),
    Flag("-mbmi", "x86_64", ("bmi1",)),
    Flag("-mbmi2", "x86_64", ("bmi2",)),
    Flag("-mavx512f", "x86_64", ("avx512f",)),
    Flag("-mavx512bw", "x86_64", ("avx512bw",)),
    Flag("-mavx512vl", "x86_64", ("avx512vl",)),
    Flag("-mavx512dq", "x86_64", ("avx512dq",)),
    Flag("-mavx512cd", "x86_64", ("avx512cd",)),
    Flag("-mavx512vnni", "x86_64", ("avx512_vnni",)),
    Flag("-mavx512bf16", "x86_64", ("avx512_bf16",)),
    Flag("-mavx512vbmi", "x86_64", ("avx512vbmi",)),
    Flag("-mavx512vbmi2", "x86_64", ("avx512_vbmi2",)),
    Flag("-mavx512ifma", "x86_64", ("avx512ifma",)),
    Flag("-mavx512bitalg", "x86_64", ("avx512_bitalg",)),
    Flag("-mavx512vpopcntdq", "x86_64", ("avx512_vpopcntdq",)),
    Flag("-mavx512fp16", "x86_64", ("avx512_fp16",)),
    Flag("-mavxvnni", "x86_64", ("avx_vnni",)),
    Flag("-mamx-tile", "x86_64", ("amx_tile",)),
    Flag("-mamx-int8", "x86_64", ("amx_int8",)),
    Flag("-mamx-bf16", "x86_64", ("amx_bf16",)),
    # aarch64: exactly these -march values; any other (native, armv8.4-a, +sve2, ...) is refused.
    Flag("-march=armv8-a", "aarch64", ("asimd",)),
    Flag("-march=armv8.2-a+dotprod", "aarch64", ("asimd", "asimddp"), _V81),
    Flag("-march=armv8.2-a+dotprod+i8mm", "aarch64", ("asimd", "asimddp", "i8mm"), _V81),
    Flag("-march=armv8.6-a", "aarch64", ("asimd", "asimddp", "i8mm", "bf16"),
         (*_V81, "fcma", "jscvt", "lrcpc", "frint")),
    Flag("-march=armv8.2-a+sve", "aarch64", ("asimd", "sve"), _V81),
)}

KNOWN_FEATURES = frozenset(FEATURES)

# Start-up check spelling of every x86_64 feature (gcc's __builtin_cpu_supports names).
CPU_SUPPORTS: dict[str, str] = {f.name: f.check for f in _X86.values()}

# Flags that change floating-point results are refused outright (kernel arithmetic is fixed by the
# base flags and the numerics contract), whatever their spelling: -f and -fno- forms, = values.
_ARITH_F = ("fast-math", "unsafe-math-optimizations", "associative-math", "reciprocal-math",
            "finite-math-only", "signed-zeros", "trapping-math", "math-errno", "rounding-math",
            "signaling-nans", "cx-limited-range", "cx-fortran-rules", "float-store",
            "single-precision-constant", "fp-int-builtin-inexact", "approx-func", "honor-nans",
            "honor-infinities", "fp-contract", "excess-precision", "fp-model", "fp-eval-method",
            "fp-exception-behavior", "denormal-fp-math", "denormal-fp-math-f32", "permitted-flt-eval-methods")
_ARITH_M = ("fpmath", "80387", "hard-float", "soft-float", "pc32", "pc64", "pc80", "recip", "daz-ftz",
            "ieee-fp", "fp-ret-in-387", "fancy-math-387", "long-double-64", "long-double-80",
            "long-double-128", "96bit-long-double", "128bit-long-double", "low-precision-recip-sqrt",
            "low-precision-sqrt", "low-precision-div")
_ARITH = re.compile(r"^(?:-Ofast|-f(?:no-)?(?:" + "|".join(map(re.escape, _ARITH_F)) + r")(?:=.*)?"
                    r"|-m(?:no-)?(?:" + "|".join(map(re.escape, _ARITH_M)) + r")(?:=.*)?)$")


def arithmetic_flag(flag: str) -> bool:
    """True for a flag that changes floating-point arithmetic (-ffast-math, -mfpmath=387, -Ofast, ...)."""
    return bool(_ARITH.match(flag))


@functools.cache
def _closure_of(features: frozenset[str]) -> frozenset[str]:
    out: set[str] = set()
    todo = list(features)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        todo.extend(FEATURES[name].implies)
    return frozenset(out)


def closure(features: Iterable[str]) -> frozenset[str]:
    """`features` plus everything they imply (unknown names are kept as they are)."""
    names = frozenset(features)
    return _closure_of(names & KNOWN_FEATURES) | (names - KNOWN_FEATURES)


def implied_by(flag: str) -> frozenset[str]:
    """Every feature code compiled with `flag` may use (its own features, their implications, `also`)."""
    entry = FLAGS[flag]
    return _closure_of(frozenset(entry.enables) | frozenset(entry.also))


def enabling_flag(feature: str) -> str | None:
    """The table flag that names `feature` with the fewest other features (-mfma for fma), or None."""
    candidates = [e for e in FLAGS.values() if feature in e.enables]
    return min(candidates, key=lambda e: len(e.enables)).flag if candidates else None


def variant_features(requires: Iterable[str], cflags: Iterable[str]) -> frozenset[str]:
    """What the start-up check must test for a variant: its requires plus every feature its flags imply.

    Flags outside the table contribute nothing here; the map loader has refused them already.
    """
    out = set(requires)
    for flag in cflags:
        if flag in FLAGS:
            out |= implied_by(flag)
    return frozenset(out)


def flags_arch(cflags: Iterable[str]) -> str | None:
    """The architecture the table's flags among `cflags` belong to (None when no table flag is given)."""
    arches = {FLAGS[f].arch for f in cflags if f in FLAGS}
    return arches.pop() if len(arches) == 1 else None

