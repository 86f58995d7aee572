"""`how` measured from the code: an instantiation is lanes include + schedule #defines + body include + one
entry point calling into an ISA-free family body; every departure makes the variant a copy, with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelmap.lkb.derive import classify_source, point_how, strip_comments

LANES = "typedef struct { float v[8]; } kl_f8;\nstatic inline float kl_add(float a, float b) { return a + b; }\n"
BODY = ('#include <stdint.h>\n#include "km_lanes.h"\n#if F_TILE >= 8\n#define F_WIDE 1\n#endif\n'
        "static void f_run(float *y, int64_t n) {\n    for (int64_t i = 0; i < n; i += F_TILE) y[0] = kl_add(y[0], 1.0f);\n}\n")
GOOD = ('/* fam/p_v.c: an instantiation of fam/f_body.h */\n#include "km_lanes_x.h"\n\n'
        "#define F_TILE 4      /* rows per step */\n#define F_PF (64 * 2) /* prefetch bytes */\n"
        '#include "f_body.h"\n\nvoid km_p__v(float *y, int64_t n) {\n    f_run(y, n);\n}\n')


def _root(tmp_path: Path, source: str = GOOD, body: str = BODY, extra: dict[str, str] | None = None) -> Path:
    files = {"common/km_lanes_x.h": LANES, "common/km_lanes.h": "#define KL_INLINE static inline\n",
             "common/km_simd_x.h": "#include <immintrin.h>\nstatic inline __m256 s(void) { return _mm256_setzero_ps(); }\n",
             "fam/f_body.h": body, "fam/p_v.c": source, **(extra or {})}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_derive_lanes_schedule_body_and_one_call_is_an_instantiation(tmp_path):
    shape = classify_source("fam/p_v.c", "km_p__v", "v", _root(tmp_path))
    assert shape.how == "instantiation", shape.why
    assert shape.lanes == "common/km_lanes_x.h" and shape.body == "fam/f_body.h"
    assert shape.schedule == ("F_TILE", "F_PF") and shape.lines == 10


@pytest.mark.parametrize(("edit", "why"), [
    (lambda s: s.replace('#include "km_lanes_x.h"', '#include "km_lanes_x.h"\n#include "km_common.h"'),
     "directive other than lanes include"),
    (lambda s: s.replace("#define F_TILE 4", "#ifdef __AVX2__\n#define F_TILE 4\n#endif"), "directive other than"),
    (lambda s: s.replace('#include "km_lanes_x.h"\n', "").replace('#include "f_body.h"',
                                                                    '#include "f_body.h"\n#include "km_lanes_x.h"'),
     "body before its lanes"),
    (lambda s: s.replace('#include "f_body.h"', '#include "f_body.h"\n#define F_NC 8'), "after the body include"),
    (lambda s: s.replace("#define F_PF (64 * 2)", "#define F_ADD(a, b) ((a) + (b))"), "directive other than"),
    (lambda s: s.replace("    f_run(y, n);", "    __m256 t; f_run(y, n);"), "ISA token __m256"),
    (lambda s: s.replace("    f_run(y, n);", "    float32x4_t t; f_run(y, n);"), "ISA token float32x4_t"),
    (lambda s: s.replace("    f_run(y, n);", "    f_run(y, n);\n    f_run(y, n);\n    f_run(y, n);"), "3 statements"),
    (lambda s: s.replace("    f_run(y, n);", "    if (n) f_run(y, n);"), "control flow"),
    (lambda s: s.replace("km_p__v", "km_p__w"), "not the map's symbol"),
    (lambda s: s.replace("    f_run(y, n);", "    y[0] = 0.0f;"), "not a call"),
    (lambda s: s.replace("    f_run(y, n);", "    f_other(y, n);"), "calls no function defined in f_body.h"),
    (lambda s: s + "static void helper(void) {}\n", "code other than one entry point"),
    (lambda s: s.replace('#include "f_body.h"\n', ""), "no family body include"),
])
def test_derive_departure_from_the_instantiation_shape_is_a_copy_with_the_reason(tmp_path, edit, why):
    shape = classify_source("fam/p_v.c", "km_p__v", "v", _root(tmp_path, edit(GOOD)))
    assert shape.how == "copy" and why in shape.why, shape.why


@pytest.mark.parametrize(("body", "why"), [
    (BODY.replace("#if F_TILE >= 8", "#if defined(__ARM_NEON)"), "tests an ISA macro"),
    (BODY.replace("#if F_TILE >= 8", "#ifdef __AVX2__"), "tests an ISA macro"),
    (BODY.replace("kl_add(y[0], 1.0f)", "_mm256_cvtss_f32(_mm256_set1_ps(1.0f))"), "ISA token _mm256_cvtss_f32"),
    (BODY.replace("#include <stdint.h>", "#include <arm_neon.h>"), "includes <arm_neon.h>"),
    (BODY.replace('#include "km_lanes.h"', '#include "km_simd_x.h"'), "km_simd_x.h uses ISA token"),
])
def test_derive_body_with_isa_code_makes_its_instantiations_copies(tmp_path, body, why):
    shape = classify_source("fam/p_v.c", "km_p__v", "v", _root(tmp_path, body=body))
    assert shape.how == "copy" and why in shape.why, shape.why


def test_derive_ref_is_the_reference_and_a_missing_source_is_a_copy(tmp_path):
    root = _root(tmp_path, extra={"fam/p_ref.c": "void km_p__ref(float *y) { y[0] = 0; }\n"})
    assert classify_source("fam/p_ref.c", "km_p__ref", "ref", root).how == "reference"
    missing = classify_source("fam/nope.c", "km_p__v", "v", root)
    assert missing.how == "copy" and missing.why == "source file not found"


def test_derive_copy_records_the_isa_headers_it_includes(tmp_path):
    src = '#include "km_simd_x.h"\nvoid km_p__v(float *y) { y[0] = 0; }\n'
    shape = classify_source("fam/p_v.c", "km_p__v", "v", _root(tmp_path, src))
    assert shape.how == "copy" and shape.isa_headers == ("common/km_simd_x.h",)


def test_point_how_needs_every_variant_of_the_point(tmp_path):
    root = _root(tmp_path, extra={"fam/p_ref.c": "void km_p__ref(float *y) { y[0] = 0; }\n"})
    inst = classify_source("fam/p_v.c", "km_p__v", "v", root)
    ref = classify_source("fam/p_ref.c", "km_p__ref", "ref", root)
    assert point_how([inst, inst]) == "instantiation" and point_how([ref]) == "reference"
    assert point_how([inst, ref]) == "copy" and point_how([]) == "copy"


def test_strip_comments_keeps_strings_and_line_numbers():
    text = 'a /* x\n y */ b // c\n"/* not a comment */" \'/\'\n'
    assert strip_comments(text) == 'a \n b \n"/* not a comment */" \'/\'\n'
