"""Packed weights: the tensors selected providers need, written once to weights.bin + weights.json.

`pack_weights` writes (or reuses) them; `load_manifest`/`check_manifest` validate them before a run;
`map_weights` memory-maps the data. Tensors in their GGUF layout stay in the model file; repacked
layouts (repack.py) are written to weights.bin under `weight_name`.
"""

from kernelmap.weights.manifest import (
    Manifest,
    ManifestEntry,
    WeightNeed,
    check_manifest,
    load_manifest,
    map_weights,
    weight_name,
)
from kernelmap.weights.pack import pack_key, pack_weights

__all__ = ["WeightNeed", "Manifest", "ManifestEntry", "pack_weights", "pack_key", "load_manifest",
           "check_manifest", "map_weights", "weight_name"]
