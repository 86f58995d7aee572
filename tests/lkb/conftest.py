"""Fixtures for the LKB tests: a small synthetic class chain, kernel maps and measurements in tmp folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT_FAMILIES = """
[[family]]
id = "dot.f32"
ops = ["linear"]
formats = ["f32*f32"]
rows_per_call = "M"
compute = "scalar_fma"
pipeline = { accumulate = "f32" }

[[family.param]]
name = "M"
kind = "runtime"

[[family.param]]
name = "lanes"
kind = "compile"
values = [1, 8]

[[family.param]]
name = "weight_format"
kind = "policy"
values = ["f32"]

[[family.param]]
name = "reduction"
kind = "numerics"

[[family.param]]
name = "accumulator"
kind = "numerics"

[[family.point]]
id = "dot.ref"
how = "instantiation"
classes = ["base", "wide"]
providers = [{ provider = "lin_f32", variants = ["ref"] }]
params = { lanes = 1, weight_format = "f32", reduction = "tree16", accumulator = "f32" }
"""

WIDE_FAMILIES = """
[[family]]
id = "dot.f32"
compute = "avx2_fma"

[[family.point]]
id = "dot.avx2"
how = "instantiation"
classes = ["wide"]
providers = [{ provider = "lin_f32", variants = ["avx2"] }]
params = { lanes = 8, weight_format = "f32", reduction = "tree16", accumulator = "f32" }
"""

ROOT_FUSIONS = """
[[rule]]
id = "linear"
op = "linear"
family = "dot.f32"
rows = [1, 16]
"""

WIDE_FUSIONS = """
[[rule]]
id = "linear"
op = "linear"
family = "dot.f32"
rows = [1, 16, 128]
"""


def _hardware(name: str, parent: str | None, features: list[str]) -> str:
    lines = ["[class]", f'name = "{name}"']
    if parent:
        lines.append(f'parent = "{parent}"')
    lines += ['arch = "x86_64"', "vector_bits = 256", f"features = {json.dumps(features)}"]
    return "\n".join(lines) + "\n"


def _map(pid: str, op: str, quant: dict, variants: list[tuple[str, list[str]]]) -> dict:
    return {"id": pid, "op": op, "quant": quant,
            "variants": [{"name": n, "symbol": f"km_{pid}__{n}", "source": f"x/{pid}_{n}.c", "requires": r}
                         for n, r in variants]}


@pytest.fixture
def lkb_tree(tmp_path: Path) -> dict[str, Path]:
    """classes/{base,wide,widest}, maps/ with lin_f32 (ref, avx2), orphan_op and quant_q4 maps."""
    classes = tmp_path / "classes"
    for name, parent, feats in (("base", None, []), ("wide", "base", ["avx2", "fma"]),
                                ("widest", "wide", ["avx512f"])):
        (classes / name).mkdir(parents=True)
        (classes / name / "HARDWARE.toml").write_text(_hardware(name, parent, feats))
    (classes / "base" / "KERNEL_FAMILIES.toml").write_text(ROOT_FAMILIES)
    (classes / "base" / "FUSIONS.toml").write_text(ROOT_FUSIONS)
    (classes / "wide" / "KERNEL_FAMILIES.toml").write_text(WIDE_FAMILIES)
    (classes / "wide" / "FUSIONS.toml").write_text(WIDE_FUSIONS)
    maps = tmp_path / "maps"
    maps.mkdir()
    f32 = {"weight": "f32", "activation": "f32", "output": "f32"}
    docs = [_map("lin_f32", "linear", f32, [("ref", []), ("avx2", ["avx2", "fma"])]),
            _map("lin_q4", "linear", {"weight": "q4_0", "activation": "q8_0", "output": "f32"}, [("ref", [])]),
            _map("softcap", "softcap", f32, [("ref", [])])]
    for doc in docs:
        (maps / f"{doc['id']}.json").write_text(json.dumps(doc))
    devices = tmp_path / "DEVICES.toml"
    devices.write_text("")
    return {"classes": classes, "maps": maps, "root": tmp_path, "devices": devices}


@pytest.fixture
def measurement():
    """The `measurement_row` writer, for tests that build measurements files."""
    return measurement_row


def measurement_row(cls: str, provider: str, variant: str, rows: int, value: float = 10.0,
                metric: str = "gbps", shape: str = "s") -> str:
    """One [[measurement]] table as kernelmap bench writes it."""
    return (f'[[measurement]]\nclass = "{cls}"\nprovider = "{provider}"\nvariant = "{variant}"\nrows = {rows}\n'
            f'threads = 1\nshape = "{shape}"\nmetric = "{metric}"\nvalue = {value}\nmachine = "m"\n'
            f'date = "2026-11-29"\n\n')
