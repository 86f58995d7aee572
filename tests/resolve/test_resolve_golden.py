"""Golden selection trace: a fixed synthetic registry and request set must give byte-identical trace JSON.

Run `pytest tests/resolve/test_resolve_golden.py --update-golden` after an intended change, and
review the diff of tests/resolve/golden/selection_trace.json.
"""

from pathlib import Path

from mapgen import make_map, write_maps

from kernelmap.errors import ResolutionError
from kernelmap.maps import load_registry
from kernelmap.resolve import Request, SelectionTrace, resolve

GOLDEN = Path(__file__).resolve().parent / "golden" / "selection_trace.json"
AVX2 = frozenset({"avx2", "fma", "f16c"})
PORTS = {"x": ("q8_k", "row_major"), "w": ("q4_k", "ggml_blocks"), "y": ("f32", "row_major")}


def _golden_trace(tmp_path: Path) -> str:
    m_constrained = make_map("lin_tuned_300", priority=300, phases=("decode",))
    m_constrained["variants"][2]["constraints"] = {"N": {"multiple": 64}}
    mdir, kdir = write_maps(tmp_path, [
        make_map("lin_cand_900", status="candidate", priority=900),
        make_map("lin_prefill_800", priority=800, phases=("prefill",)),
        make_map("lin_q8_700", priority=700, weight="q8_0", act="q8_0"),
        m_constrained,
        make_map("lin_main_100", priority=100, may_alias=("input:x",)),
        make_map("lin_other_group_50", priority=50, group="linear.q4_k.q8_k.f32.alt.v1"),
    ])
    reg = load_registry([mdir], builtin=False, kernel_root=kdir)
    trace = SelectionTrace(hashes={"maps": reg.hash, "circuit": "0" * 64, "policy": "1" * 64})
    requests = [
        Request(op="linear", phase="decode", contract="linear.q4_k.q8_k.f32.v1", ports=PORTS,
                dims={"M": 1, "N": 650, "K": 1024}, isa=AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"},
                label="decode:blk.0.attn_q"),
        Request(op="linear", phase="prefill", contract="linear.q4_k.q8_k.f32.v1", ports=PORTS,
                dims={"M": 7, "N": 640, "K": 1024}, isa=AVX2, aliases={("y", "x")}, label="prefill:blk.0.attn_q"),
        Request(op="linear", phase="decode", ports=PORTS, dims={"M": 1, "N": 640, "K": 1024}, isa=AVX2,
                label="decode:blk.0.no_contract"),
        Request(op="linear", phase="decode", contract="linear.q6_k.q8_k.f32.v1", isa=AVX2,
                label="decode:blk.0.ffn_down"),
        Request(op="rope", phase="decode", contract="rope.neox.f32.v1", label="decode:blk.0.q_rope"),
    ]
    for r in requests:
        try:
            trace.add(r.label, r, resolve(r, reg))
        except ResolutionError as exc:
            trace.add(r.label, r, exc)
    return trace.dumps()


def test_golden_selection_trace_is_byte_identical(tmp_path, request):
    text = _golden_trace(tmp_path)
    if request.config.getoption("--update-golden"):
        GOLDEN.write_text(text)
    assert GOLDEN.is_file(), "run pytest --update-golden to create " + str(GOLDEN)
    assert text == GOLDEN.read_text(), "selection trace changed: review and run pytest --update-golden"
