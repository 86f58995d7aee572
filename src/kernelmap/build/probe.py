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

from kernelmap.errors import BuildError

__all__ = ["KERNEL_SYMBOL", "available_kernels", "probe_library", "unowned_kernels"]

# Every kernel entry point is km_<map id>__<variant>.
KERNEL_SYMBOL = re.compile(r"^km_([a-z0-9_]+?)__([a-z0-9_]+)$")


def probe_library(path: str | Path) -> frozenset[str]:
    """Names of the defined, exported (global or weak, default or protected visibility) functions in .dynsym."""
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
            found = set()
            for sym in dynsym.iter_symbols():
                entry = sym.entry
                if entry.st_info.type not in ("STT_FUNC", "STT_GNU_IFUNC"):
                    continue
                if entry.st_info.bind not in ("STB_GLOBAL", "STB_WEAK"):
                    continue
                if entry.st_shndx == "SHN_UNDEF" or entry.st_other.visibility not in ("STV_DEFAULT",
                                                                                      "STV_PROTECTED"):
                    continue
                found.add(sym.name)
    except FileNotFoundError as exc:
        raise BuildError("kernel library not found", path=path) from exc
    except (ELFError, OSError, ValueError) as exc:
        raise BuildError(f"cannot read the kernel library as ELF: {exc}", path=path,
                         hint="pass the .so the build produced") from exc
    return frozenset(found)


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
