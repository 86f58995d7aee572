"""Target stage: which CPU features this process may use, and the LKB hardware class they put the host in.

Input: /proc/cpuinfo (the kernel lists only features the OS enables), or archspec off Linux, and the
KERNELMAP_ISA environment variable (a forced lower set). Output: frozensets of Linux feature names.
It does not choose kernels; the resolver filters variants against `target_features()`.
"""

from __future__ import annotations

import functools
import os
import platform
from collections.abc import Iterable
from pathlib import Path

from kernelmap import isa_flags
from kernelmap.errors import TargetError, closest

__all__ = [
    "KNOWN_FEATURES",
    "LEVELS",
    "host_class",
    "host_features",
    "missing",
    "parse_isa",
    "require",
    "target_features",
]

ISA_ENV = "KERNELMAP_ISA"

# Named levels for KERNELMAP_ISA and parse_isa: each is the complete set of gated features it allows.
LEVELS: dict[str, frozenset[str]] = {
    "scalar": frozenset(),
    "avx2": frozenset({"avx2", "fma", "f16c"}),
}
LEVELS["avx512"] = LEVELS["avx2"] | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
LEVELS["avx512vnni"] = LEVELS["avx512"] | {"avx512_vnni"}

# Vector features a forced level can switch off. Everything else the host has (sse*, popcnt, ...)
# stays, because no variant is gated on it.
_GATED_X86 = frozenset({
    "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512cd", "avx512_vnni", "avx512_bf16", "avx512ifma", "avx512vbmi", "avx512_vbmi2",
    "avx512_bitalg", "avx512_vpopcntdq", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16",
})
_GATED_ARM = frozenset({"asimd", "asimddp", "asimdhp", "fphp", "sve", "sve2", "i8mm", "bf16"})
_OTHER_KNOWN = frozenset({"sse", "sse2", "cx16", "movbe", "abm", "lzcnt", "osxsave", "neon"})
# Every feature of the ISA flag table (kernelmap/isa_flags.py, the one list a map's requires may use)
# plus the few the LKB hardware classes and fusion rules name besides.
KNOWN_FEATURES = isa_flags.KNOWN_FEATURES | _OTHER_KNOWN

# LKB hardware classes, most specific first: (class name, machine family, features it needs).
_X86_V2 = frozenset({"sse4_2", "ssse3", "popcnt", "cx16"})
_X86_V3 = _X86_V2 | {"avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe"}
_X86_V4 = _X86_V3 | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}
_CLASSES: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("x86_64_v4_vnni", "x86_64", _X86_V4 | {"avx512_vnni"}),
    ("x86_64_v4", "x86_64", _X86_V4),
    ("x86_64_v3", "x86_64", _X86_V3),
    ("x86_64_v2", "x86_64", _X86_V2),
    ("x86_64", "x86_64", frozenset()),
    ("aarch64_sve", "aarch64", frozenset({"asimd", "asimddp", "sve"})),
    ("aarch64_dotprod", "aarch64", frozenset({"asimd", "asimddp"})),
    ("aarch64", "aarch64", frozenset()),
)


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _parse_cpuinfo(text: str) -> frozenset[str]:
    """Features present on every processor listed in a /proc/cpuinfo text (x86 `flags`, arm `Features`)."""
    common: set[str] | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in ("flags", "Features"):
            continue
        flags = set(value.split())
        common = flags if common is None else common & flags
    return frozenset(common or ())


@functools.lru_cache(maxsize=1)
def host_features() -> frozenset[str]:
    """Features the CPU has and the OS enables (Linux: /proc/cpuinfo; elsewhere: archspec)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        try:
            found = _parse_cpuinfo(cpuinfo.read_text(errors="replace"))
        except OSError:
            found = frozenset()
        if found:
            return found
    import archspec.cpu

    return frozenset(archspec.cpu.host().features)


def parse_isa(text: str) -> frozenset[str]:
    """Parse a level name (scalar|avx2|avx512|avx512vnni) or a comma list of feature names."""
    words = [w.strip().lower() for w in text.replace(" ", ",").split(",") if w.strip()]
    out: set[str] = set()
    for word in words:
        if word in LEVELS:
            out |= LEVELS[word]
        elif word in KNOWN_FEATURES:
            out.add(word)
        else:
            allowed = sorted(LEVELS) + sorted(KNOWN_FEATURES)
            near = closest(word, allowed)
            raise TargetError(
                f"unknown ISA level or feature {word!r}" + (f" (closest: {near})" if near else ""),
                pointer=ISA_ENV, value=word, expected="a level (" + ", ".join(LEVELS) + ") or feature names",
                hint="feature names use the Linux /proc/cpuinfo spelling, e.g. avx2,fma,f16c")
    return frozenset(out)


def missing(required: Iterable[str], available: Iterable[str]) -> list[str]:
    """The required features not in `available`, sorted."""
    have = set(available)
    return sorted(set(required) - have)


def target_features() -> frozenset[str]:
    """Host features, restricted to the forced lower set in $KERNELMAP_ISA when it is set."""
    host = host_features()
    text = os.environ.get(ISA_ENV, "").strip()
    if not text:
        return host
    wanted = parse_isa(text)
    lacking = missing(wanted, host)
    if lacking:
        raise TargetError(
            f"{ISA_ENV}={text} asks for {', '.join(lacking)}, which this CPU does not have",
            pointer=ISA_ENV, value=text, expected="features of this CPU",
            hint=f"use a lower level, e.g. {ISA_ENV}=avx2 or {ISA_ENV}=scalar")
    # A forced level keeps what its features imply (avx under avx2, fphp under asimdhp, ...) where the host has it.
    wanted = wanted | (isa_flags.closure(wanted) & host)
    gated = _GATED_X86 | _GATED_ARM
    return frozenset((host - gated) | wanted)


def require(required: Iterable[str], what: str, available: Iterable[str] | None = None) -> None:
    """Refuse (TargetError) when `what` needs a feature the target lacks, instead of an illegal instruction."""
    have = target_features() if available is None else frozenset(available)
    lacking = missing(required, have)
    if lacking:
        noun = "which this CPU does not have"
        if available is None and os.environ.get(ISA_ENV) and not missing(lacking, host_features()):
            noun = f"which {ISA_ENV} excludes"
        raise TargetError(
            f"{what} needs {', '.join(lacking)}, {noun}",
            value=lacking, hint="pick a variant this target supports (see `kernelmap bench` or unset "
            f"{ISA_ENV})")


def host_class(features: Iterable[str] | None = None, machine: str | None = None) -> str:
    """The LKB hardware class name of a feature set (default: this host), e.g. x86_64_v4_vnni."""
    feats = host_features() if features is None else frozenset(features)
    arch = machine or _machine()
    for name, family, needs in _CLASSES:
        if family == arch and needs <= feats:
            return name
    return arch
