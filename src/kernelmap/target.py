"""Target stage: which CPU features this process may use, and the LKB hardware class they put the host in.

Input: /proc/cpuinfo (the kernel lists only features the OS enables), or archspec off Linux, and the
KERNELMAP_ISA environment variable (a forced lower set). Output: frozensets of Linux feature names.
It does not choose kernels; the resolver filters variants against `target_features()`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kernelmap import isa_flags
from kernelmap.errors import TargetError, closest

__all__ = [
    "KNOWN_FEATURES",
    "LEVELS",
    "Target",
    "arch_of",
    "cross_compiler",
    "host_arch",
    "host_class",
    "host_features",
    "host_model_name",
    "missing",
    "parse_isa",
    "parse_target",
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
LEVELS["neon"] = frozenset({"asimd"})  # aarch64: armv8-a AdvSIMD, then + SDOT
LEVELS["dotprod"] = LEVELS["neon"] | {"asimddp"}

# Vector features a forced level can switch off. Everything else the host has (sse*, popcnt, ...)
# stays, because no variant is gated on it.
_GATED_X86 = frozenset({
    "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512cd", "avx512_vnni", "avx512_bf16", "avx512ifma", "avx512vbmi", "avx512_vbmi2",
    "avx512_bitalg", "avx512_vpopcntdq", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16",
})
_GATED_ARM = frozenset({"asimd", "asimddp", "asimdhp", "fphp", "sve", "sve2", "i8mm", "bf16"})
_OTHER_KNOWN = frozenset({
    "sse", "sse2", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16", "movbe", "bmi1", "bmi2", "abm",
    "lzcnt", "xsave", "osxsave", "fp", "neon",
})
# Every feature of the ISA flag table (kernelmap/isa_flags.py, the one list a map's requires may use)
# plus the few the LKB hardware classes, fusion rules and aarch64 HWCAP bits name besides.
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


AMX_FEATURES = frozenset({"amx_tile", "amx_int8", "amx_bf16"})


def _tile_state_granted() -> bool:
    """Whether Linux grants this process the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA;
    kernels before 5.16 refuse). The CPU flag alone does not make the tile instructions usable."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(158, 0x1023, 18) == 0  # SYS_arch_prctl on x86_64, ARCH_REQ_XCOMP_PERM, XTILEDATA
    except (OSError, AttributeError):
        return False


def _without_refused_tiles(found: frozenset[str]) -> frozenset[str]:
    """`found` without the AMX features when the OS refuses the tile state: the resolver then never selects a
    tile variant a program built here could not run (its start-up check would refuse; see codegen/emit.py)."""
    if found & AMX_FEATURES and not (_machine() == "x86_64" and _tile_state_granted()):
        return found - AMX_FEATURES
    return found


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
            return _without_refused_tiles(found)
    import archspec.cpu

    return frozenset(archspec.cpu.host().features)


@functools.lru_cache(maxsize=1)
def host_model_name() -> str:
    """The CPU's model name as the OS reports it (/proc/cpuinfo `model name`, else platform.processor())."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        try:
            for line in cpuinfo.read_text(errors="replace").splitlines():
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return value.strip()
        except OSError:
            pass
    return platform.processor() or _machine()


def parse_isa(text: str) -> frozenset[str]:
    """Parse a level name (scalar|avx2|avx512|avx512vnni|neon|dotprod) or a comma list of feature names."""
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
    arch = machine or (arch_of(feats) if features is not None else None) or _machine()
    for name, family, needs in _CLASSES:
        if family == arch and needs <= feats:
            return name
    return arch


# ---- Targets: `--target NAME[,MODIFIER...]` names the CPU a build is for (another machine's, too) ----

# The features only one architecture has (a feature set naming one of them belongs to that arch).
_ARCH_ONLY = {"x86_64": _GATED_X86 | {"sse4_2", "ssse3", "popcnt", "cx16", "movbe", "bmi1", "bmi2"},
              "aarch64": _GATED_ARM | {"fp"}}
# aarch64 targets: Armv8-A always has fp and AdvSIMD (Linux: "fp asimd"); each modifier adds the
# /proc/cpuinfo features of one extension (+sve implies half-precision arithmetic in gcc and clang).
_ARM_BASE = frozenset({"fp", "asimd"})
_ARM_MODIFIERS = {"dotprod": ("asimddp",), "i8mm": ("i8mm",), "sve": ("sve", "fphp", "asimdhp"),
                  "fp16": ("fphp", "asimdhp"), "bf16": ("bf16",)}
# The C compiler of a cross build (Debian/Ubuntu package gcc-<triple>); $CC overrides it.
_CROSS_CC = {"aarch64": "aarch64-linux-gnu-gcc", "x86_64": "x86_64-linux-gnu-gcc"}


def host_arch() -> str:
    """This machine's architecture name (x86_64, aarch64, ...)."""
    return _machine()


def arch_of(features: Iterable[str]) -> str | None:
    """The architecture a feature set belongs to (x86_64 or aarch64), None when it names neither's own."""
    feats = frozenset(features)
    found = [arch for arch, own in _ARCH_ONLY.items() if feats & own]
    return found[0] if len(found) == 1 else None


def cross_compiler(arch: str) -> str:
    """The C compiler for `arch` ignoring $CC: gcc on a machine of that arch, else the cross gcc."""
    return "gcc" if arch == _machine() else _CROSS_CC[arch]


@dataclass(frozen=True)
class Target:
    """A build target: its architecture, the complete feature set variants are selected against, the C
    compiler ($CC, else gcc natively, else the cross gcc) and the LKB class the features put it in."""

    spec: str
    arch: str
    features: frozenset[str]
    cc: str

    @property
    def cls(self) -> str:
        return host_class(self.features, self.arch)

    @property
    def cross(self) -> bool:
        return self.arch != _machine()

    @contextlib.contextmanager
    def compiler_env(self) -> Iterator[None]:
        """Run a block with $CC set to this target's compiler (every build step reads $CC)."""
        old = os.environ.get("CC")
        os.environ["CC"] = self.cc
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("CC", None)
            else:
                os.environ["CC"] = old


def _target_error(word: str, allowed: list[str], spec: str) -> TargetError:
    near = closest(word, allowed)
    return TargetError(f"unknown target name or modifier {word!r}" + (f" (closest: {near})" if near else ""),
                       pointer="--target", value=spec, expected=", ".join(allowed),
                       hint="e.g. --target aarch64,dotprod or --target x86_64_v3")


def parse_target(spec: str) -> Target:
    """Parse `aarch64[,dotprod,i8mm,sve,...]`, an x86 class (`x86_64`, `x86_64_v2` .. `x86_64_v4_vnni`,
    optionally `,feature...`) or `host`. Modifiers may also be feature names of the target's arch."""
    words = [w.strip().lower() for w in spec.split(",") if w.strip()]
    if not words:
        raise TargetError("empty target", pointer="--target", value=spec, expected="e.g. aarch64,dotprod")
    head, mods = words[0], words[1:]
    x86 = {name: needs for name, family, needs in _CLASSES if family == "x86_64"}
    if head == "host" and not mods:
        feats = target_features()
        arch = _machine()
    elif head in ("aarch64", "arm64"):
        arch, feats = "aarch64", set(_ARM_BASE)
        for m in mods:
            if m in _ARM_MODIFIERS:
                feats |= set(_ARM_MODIFIERS[m])
            elif m in _ARCH_ONLY["aarch64"]:
                feats.add(m)
            else:
                raise _target_error(m, sorted(_ARM_MODIFIERS) + sorted(_GATED_ARM), spec)
    elif head in x86:
        arch, feats = "x86_64", set(x86[head])
        for m in mods:
            if m in _GATED_X86:
                feats.add(m)
            else:
                raise _target_error(m, sorted(_GATED_X86), spec)
    else:
        raise _target_error(head, ["host", "aarch64", *sorted(x86)], spec)
    cc = os.environ.get("CC") or cross_compiler(arch)
    return Target(",".join(words), arch, frozenset(feats), cc)
