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


# A toy family body, its lanes and sources: lin_f32 avx2 is an instantiation (kernelmap.lkb.derive
# measures it), the refs are plain C. `copy_source` turns the avx2 file into a copy.
KERNELS = {
    "common/km_lanes_toy.h": "typedef struct { float v[8]; } kl_f8;\n"
                             "static inline float kl_add(float a, float b) { return a + b; }\n",
    "x/dot_body.h": "#include <stdint.h>\nstatic void dot_run(float *y, const float *w, int64_t n) {\n"
                    "    for (int64_t i = 0; i < n; i += DOT_TILE) y[0] = kl_add(y[0], w[i]);\n}\n",
    "x/lin_f32_avx2.c": "/* lin_f32 avx2: an instantiation of x/dot_body.h */\n#include \"km_lanes_toy.h\"\n\n"
                        "#define DOT_TILE 8 /* rows per step */\n#include \"dot_body.h\"\n\n"
                        "void km_lin_f32__avx2(float *y, const float *w, int64_t n) { dot_run(y, w, n); }\n",
    "x/lin_f32_ref.c": "void km_lin_f32__ref(float *y) { y[0] = 0.0f; }\n",
    "x/lin_q4_ref.c": "void km_lin_q4__ref(float *y) { y[0] = 0.0f; }\n",
    "x/softcap_ref.c": "void km_softcap__ref(float *y) { y[0] = 0.0f; }\n",
}
COPY_AVX2 = ("#include <immintrin.h>\n#include <stdint.h>\nvoid km_lin_f32__avx2(float *y, const float *w, int64_t n) {\n"
             "    __m256 a = _mm256_setzero_ps();\n    (void)a; (void)w; (void)n; y[0] = 0.0f;\n}\n")


@pytest.fixture
def lkb_tree(tmp_path: Path) -> dict[str, Path]:
    """classes/{base,wide,widest}, maps/ with lin_f32 (ref, avx2), orphan_op and quant_q4 maps, kernels/."""
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
    kernels = tmp_path / "kernels"
    for rel, text in KERNELS.items():
        (kernels / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernels / rel).write_text(text)
    devices = tmp_path / "DEVICES.toml"
    devices.write_text("")
    return {"classes": classes, "maps": maps, "root": tmp_path, "devices": devices, "kernels": kernels}


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


@pytest.fixture
def make_copy(lkb_tree):
    """Rewrite the toy lin_f32 avx2 source as a hand-vectorised copy (intrinsics, no family body)."""
    def run() -> None:
        (lkb_tree["kernels"] / "x" / "lin_f32_avx2.c").write_text(COPY_AVX2)
    return run
