"""Map stage: kernel maps as validated data (schema + semantic checks), the registry, and the audit.

Input: `kernel_maps/*.json` (and extra map dirs). Output: a `Registry` of immutable `Provider`s with
content hashes. It does not choose providers (kernelmap.resolve does).
"""

from kernelmap.maps.loader import load_map
from kernelmap.maps.provider import CallParam, Constraint, Param, Port, Provider, Scratch, Variant
from kernelmap.maps.registry import MAPS_DIR, Registry, load_registry

__all__ = [
    "MAPS_DIR",
    "CallParam",
    "Constraint",
    "Param",
    "Port",
    "Provider",
    "Registry",
    "Scratch",
    "Variant",
    "load_map",
    "load_registry",
]
