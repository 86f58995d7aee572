"""Build stage, last step: probe a compiled kernel library for the functions it really exports.

Input: a shared object (ELF) and the kernel-map registry. Output: the exported defined function
symbols from its dynamic symbol table, and the (map id, variant, symbol) kernels they provide. It
trusts the binary, not the maps; it does not load the library or check what the functions compute.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from kernelmap.errors import BuildError

__all__ = ["KERNEL_SYMBOL", "available_kernels", "probe_library", "unowned_kernels"]

# Every kernel entry point is km_<map id>__<variant>.
KERNEL_SYMBOL = re.compile(r"^km_([a-z0-9_]+?)__([a-z0-9_]+)$")


_SYM64 = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
                   ("value", "<u8"), ("size", "<u8")])
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_STB_GLOBAL, _STB_WEAK = 1, 2
_STV_DEFAULT, _STV_PROTECTED = 0, 3


def _exported(names: list[str], info: np.ndarray, other: np.ndarray, shndx: np.ndarray) -> frozenset[str]:
    kind = info & 0xF
    bind = info >> 4
    vis = other & 0x3
    keep = (((kind == _STT_FUNC) | (kind == _STT_GNU_IFUNC)) & ((bind == _STB_GLOBAL) | (bind == _STB_WEAK))
            & (shndx != 0) & ((vis == _STV_DEFAULT) | (vis == _STV_PROTECTED)))
    return frozenset(names[i] for i in np.flatnonzero(keep))


def probe_library(path: str | Path) -> frozenset[str]:
    """Names of the defined, exported (global or weak, default or protected visibility) functions in .dynsym.

    pyelftools finds the sections; the symbol entries of a little-endian ELF64 file are decoded in
    one NumPy pass (a few ms for libc's 2,500 symbols), others through pyelftools.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    path = Path(path)
    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            dynsym = elf.get_section_by_name(".dynsym")
            if dynsym is None:
                raise BuildError("not a shared library: no dynamic symbol table (.dynsym)", path=path,
                                 hint="pass the .so the build produced")
            if elf.elfclass == 64 and elf.little_endian and dynsym["sh_entsize"] == _SYM64.itemsize:
                strtab = elf.get_section(dynsym["sh_link"]).data()
                syms = np.frombuffer(dynsym.data(), dtype=_SYM64)
                names = []
                for off in syms["name"].tolist():
                    end = strtab.find(b"\0", off)
                    names.append(strtab[off:end if end >= 0 else len(strtab)].decode("utf-8", "replace"))
                return _exported(names, syms["info"], syms["other"], syms["shndx"])
            entries = list(dynsym.iter_symbols())
            names = [sym.name for sym in entries]
            info = np.array([(_kind(sym) | (_bind(sym) << 4)) for sym in entries], dtype=np.uint8)
            other = np.array([_vis(sym) for sym in entries], dtype=np.uint8)
            shndx = np.array([0 if sym.entry.st_shndx == "SHN_UNDEF" else 1 for sym in entries], dtype=np.uint16)
            return _exported(names, info, other, shndx)
    except FileNotFoundError as exc:
        raise BuildError("kernel library not found", path=path) from exc
    except (ELFError, OSError, ValueError, AttributeError) as exc:
        raise BuildError(f"cannot read the kernel library as ELF: {exc}", path=path,
                         hint="pass the .so the build produced") from exc


def _kind(sym) -> int:
    return {"STT_FUNC": _STT_FUNC, "STT_GNU_IFUNC": _STT_GNU_IFUNC, "STT_LOOS": _STT_GNU_IFUNC}.get(sym.entry.st_info.type, 0)


def _bind(sym) -> int:
    return {"STB_GLOBAL": _STB_GLOBAL, "STB_WEAK": _STB_WEAK}.get(sym.entry.st_info.bind, 0)


def _vis(sym) -> int:
    return {"STV_DEFAULT": _STV_DEFAULT, "STV_PROTECTED": _STV_PROTECTED}.get(sym.entry.st_other.visibility, 1)


def _variants(registry: Any) -> Iterable[tuple[str, str, str]]:
    """(map id, variant name, symbol) for every variant of every provider in a registry."""
    for provider in registry.providers.values():
        for variant in provider.variants:
            yield provider.id, variant.name, variant.symbol


def available_kernels(path: str | Path, registry: Any) -> set[tuple[str, str, str]]:
    """The (map id, variant, symbol) triples whose symbol the library at `path` exports."""
    exported = probe_library(path)
    return {row for row in _variants(registry) if row[2] in exported}


def unowned_kernels(path: str | Path, registry: Any) -> list[str]:
    """Exported km_*__* symbols that no map variant owns (orphans), sorted."""
    owned = {row[2] for row in _variants(registry)}
    return sorted(s for s in probe_library(path) if KERNEL_SYMBOL.match(s) and s not in owned)
