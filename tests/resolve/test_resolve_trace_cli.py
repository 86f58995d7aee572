"""Selection trace (write/load, determinism, atomicity) and the resolve/explain CLI (output, exit codes)."""

import io
import json

import pytest
from mapgen import make_map, write_maps

from kernelmap.cli import main
from kernelmap.cli.explain_cmd import render_trace
from kernelmap.errors import MapError, RequestError, ResolutionError
from kernelmap.maps import load_registry
from kernelmap.resolve import Request, SelectionTrace, resolve
from kernelmap.resolve.trace import TRACE_SCHEMA

AVX2 = frozenset({"avx2", "fma", "f16c"})


@pytest.fixture
def maps_dir(tmp_path):
    mdir, _ = write_maps(tmp_path / "m", [
        make_map("lin_main", priority=100),
        make_map("lin_cand", status="candidate", priority=900),
        make_map("lin_q8", weight="q8_0", act="q8_0", priority=100),
    ])
    return mdir


def _trace(maps_dir) -> SelectionTrace:
    reg = load_registry([maps_dir], builtin=False, kernel_root=None)
    trace = SelectionTrace(hashes={"maps": reg.hash, "policy": "p" * 64, "circuit": "c" * 64})
    ok = Request(op="linear", phase="decode", contract="linear.q4_k.q8_k.f32.v1", isa=AVX2, dims={"K": 512},
                 label="blk.0.attn_q")
    trace.add(ok.label, ok, resolve(ok, reg))
    bad = Request(op="linear", phase="decode", contract="linear.q6_k.q8_k.f32.v1", label="blk.0.ffn_down")
    with pytest.raises(ResolutionError) as exc:
        resolve(bad, reg)
    trace.add(bad.label, bad, exc.value)
    return trace


def test_trace_write_load_roundtrip_is_byte_identical(maps_dir, tmp_path):
    trace = _trace(maps_dir)
    path = trace.write(tmp_path / "out" / "selection_trace.json")
    loaded = SelectionTrace.load(path)
    assert loaded.dumps() == path.read_text() == trace.dumps()
    doc = json.loads(path.read_text())
    assert doc["schema"] == TRACE_SCHEMA and set(doc["hashes"]) == {"maps", "policy", "circuit"}
    assert [e["label"] for e in doc["entries"]] == ["blk.0.attn_q", "blk.0.ffn_down"]
    assert [p.name for p in path.parent.iterdir()] == ["selection_trace.json"]  # no temp file left


def test_trace_records_failed_resolution_with_all_rows_rejected(maps_dir):
    entry = _trace(maps_dir).entries[1]
    assert entry["selected"] is None and "no provider for op linear" in entry["error"]
    assert entry["rows"] and {r["decision"] for r in entry["rows"]} == {"rejected"}


def test_trace_rows_carry_required_fields(maps_dir):
    for entry in _trace(maps_dir).entries:
        for r in entry["rows"]:
            assert {"provider", "decision", "stage", "status", "priority", "equivalence_group"} <= set(r)
            assert ("reason" in r) == (r["decision"] == "rejected")
            assert ("rank" in r) == (r["decision"] != "rejected")


def test_trace_twice_gives_identical_bytes(maps_dir):
    assert _trace(maps_dir).dumps() == _trace(maps_dir).dumps()


def test_trace_load_wrong_schema_names_file_and_pointer(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": "other/1", "entries": []}))
    with pytest.raises(MapError) as exc:
        SelectionTrace.load(path)
    assert exc.value.pointer == "/schema" and exc.value.path == str(path)


def test_render_trace_why_not_provider_shows_its_rows_only(maps_dir):
    out = io.StringIO()
    render_trace(_trace(maps_dir), provider="lin_cand", json_out=True, file=out)
    doc = json.loads(out.getvalue())
    assert {r["provider"] for e in doc["entries"] for r in e["rows"]} == {"lin_cand"}
    assert doc["entries"][0]["rows"][0]["reason"] == "status_not_production:candidate"


def test_render_trace_table_mentions_selection_and_failure(maps_dir):
    out = io.StringIO()
    render_trace(_trace(maps_dir), file=out)
    text = out.getvalue()
    assert "blk.0.attn_q" in text and "lin_main" in text and "FAILED" in text
    out = io.StringIO()
    render_trace(_trace(maps_dir), op="blk.0.attn_q", file=out)
    assert "contract_mismatch" in out.getvalue() and "selected" in out.getvalue()


def test_render_trace_unknown_label_names_closest(maps_dir):
    with pytest.raises(RequestError) as exc:
        render_trace(_trace(maps_dir), op="blk.0.attn_k", file=io.StringIO())
    assert exc.value.hint == "closest: blk.0.attn_q"


def test_render_trace_provider_never_candidate_is_refused(maps_dir):
    with pytest.raises(RequestError, match="never a candidate"):
        render_trace(_trace(maps_dir), provider="rope_neox_f32", file=io.StringIO())


def test_cli_explain_build_dir_and_json(maps_dir, tmp_path, capsys):
    _trace(maps_dir).write(tmp_path / "build" / "selection_trace.json")
    assert main(["explain", str(tmp_path / "build"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == TRACE_SCHEMA
    assert main(["explain", str(tmp_path / "build"), "--op", "blk.0.ffn_down", "--provider", "lin_main"]) == 0
    assert "contract_mismatch" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["explain", "/nonexistent/trace.json"], ["explain"],
                                  ["explain", "BUILD", "--op", "nope"]])
def test_cli_explain_bad_input_exits_1_one_line(args, maps_dir, tmp_path, capsys):
    _trace(maps_dir).write(tmp_path / "selection_trace.json")
    args = [str(tmp_path) if a == "BUILD" else a for a in args]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def _resolve_args(maps_dir, *extra):
    # kernelmap-fast names the f32.v1 linear contracts that the test maps implement
    return ["resolve", "--op", "linear", "--phase", "decode", "--maps", str(maps_dir), "--no-builtin",
            "--isa", "avx2,fma,f16c", "--policy", "kernelmap-fast", *extra]


def test_cli_resolve_asks_policy_and_prints_selection(maps_dir, capsys):
    assert main(_resolve_args(maps_dir, "--dtype", "weight=q4_k", "--dim", "K=512")) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("linear: lin_main/avx2 (km_lin_main__avx2) contract linear.q4_k.q8_k.f32.v1")
    assert "policy kernelmap-fast" in cap.out and "lin_cand" in cap.err  # candidate table on stderr


def test_cli_resolve_json_prints_trace_entry(maps_dir, capsys):
    assert main(_resolve_args(maps_dir, "--contract", "linear.q8_0.q8_0.f32.v1", "--json",
                              "--port", "w=q8_0:ggml_blocks", "--label", "blk.1.attn_v", "--dim", "K=512",
                              "--dim", "M=1..64")) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["selected"]["provider"] == "lin_q8" and entry["label"] == "blk.1.attn_v"
    assert entry["request"]["dims"] == {"K": 512, "M": [1, 64]}
    assert entry["request"]["ports"] == {"w": {"dtype": "q8_0", "layout": "ggml_blocks"}}


def test_cli_resolve_allow_candidates_changes_the_answer_within_group(maps_dir, capsys):
    assert main(_resolve_args(maps_dir, "--dtype", "weight=q4_k", "--dim", "K=512", "--allow-candidates")) == 0
    assert "lin_main/avx2" in capsys.readouterr().out  # production still ranks before candidate


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--dtype", "weight=q4_k", "--phase", "decoding"], "unknown phase"),
    (["--dtype", "weight=q4_k", "--port", "x=q8_k"], "malformed --port value"),
    (["--dtype", "weight=q4_k", "--dim", "K=abc"], "malformed --dim value"),
    (["--dtype", "weight=q4_k", "--dim", "M=9..1"], "a dim range must have lo <= hi"),
    (["--dtype", "weight=iq2"], "no rule for op \"linear\" with weight=iq2"),
    (["--contract", "linear.q6_k.q8_k.f32.v1"], "no provider for op linear in phase decode"),
    (["--dtype", "weight=q4_k", "--isa", "AVX2"], "malformed isa feature"),
])
def test_cli_resolve_bad_request_exits_1_one_line(maps_dir, capsys, tmp_path, monkeypatch, extra, fragment):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(_resolve_args(maps_dir, *extra)) == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith(("error:", "hint:"))]
    assert lines[0].startswith("error: ") and fragment in lines[0], err
    assert len(lines) <= 2 and "Traceback" not in err
    assert list(cwd.iterdir()) == []


def test_cli_resolve_bad_map_dir_exits_1(tmp_path, capsys):
    mdir = tmp_path / "maps"
    mdir.mkdir()
    (mdir / "broken.json").write_text("{")
    assert main(["resolve", "--op", "linear", "--phase", "decode", "--contract", "a.v1", "--maps", str(mdir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {mdir / 'broken.json'}: /: not valid JSON") and "Traceback" not in err


def test_benchmark_script_small_run_prints_one_json_line():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "resolve.py"
    out = subprocess.run([sys.executable, str(script), "--requests", "300", "--maps", "30", "--repeat", "1"],
                         capture_output=True, text=True, check=True, timeout=120)
    doc = json.loads(out.stdout)
    assert doc["maps"] == 30 and doc["requests"] == 300
    assert doc["selected"] + doc["failed_closed"] == 300 and doc["selected"] > 0


@pytest.mark.parametrize(("mutate", "pointer"), [
    (lambda d: d["entries"][0].pop("rows"), "/entries/0"),
    (lambda d: d["entries"][0]["rows"].insert(0, "x"), "/entries/0/rows/0"),
    (lambda d: d["entries"][0]["rows"][0].update(priority="high"), "/entries/0/rows/0"),
    (lambda d: d["entries"][1]["request"].pop("op"), "/entries/1"),
    (lambda d: d.update(entries={}), "/entries"),
])
def test_trace_load_malformed_entry_names_pointer(maps_dir, tmp_path, mutate, pointer, capsys):
    path = _trace(maps_dir).write(tmp_path / "t.json")
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(MapError) as exc:
        SelectionTrace.load(path)
    assert exc.value.pointer == pointer
    assert main(["explain", str(path)]) == 1 and "Traceback" not in capsys.readouterr().err
