"""`kernelmap lkb`: gap lines from a profile, JSON, the model hook error, campaign ledgers, exit codes."""

from __future__ import annotations

import json

from kernelmap.cli import main
from kernelmap.lkb._io import read_toml


def _profile(tmp_path):
    path = tmp_path / "profile.json"
    step = [{"op": "blk0.attn_q", "provider": "linear_q4_k_q8_k", "variant": "avx512vnni", "seconds": 2e-5},
            {"op": "blk0.norm", "provider": "rmsnorm_f32", "variant": "ref", "seconds": 1e-6},
            {"op": "blk0.mystery", "provider": "softcap_f32", "variant": "ref", "seconds": 1e-6}]
    path.write_text(json.dumps({"schema": "kernelmap.lkb_profile/1", "model": "synthetic",
                                "rows": {"1": step, "16": step, "128": step}}))
    return path


def test_cli_lkb_prints_three_gap_lines_adding_to_100(tmp_path, capsys):
    rc = main(["lkb", "--class", "x86_64_v4_vnni", "--profile", str(_profile(tmp_path)),
               "--measurements", str(tmp_path / "none.toml")])
    out = capsys.readouterr().out
    assert rc == 0
    lines = [line for line in out.splitlines() if line.startswith("C")]
    assert [line.split(":")[0] for line in lines] == ["C1", "C16", "C128"]
    for line in lines:
        numbers = [float(w.rstrip("%,")) for w in line.split() if w.endswith("%") or w.endswith("%,")]
        assert len(numbers) == 5 and round(sum(numbers), 6) == 100.0
    assert "LKB residual:" in out and "single-class bucket" in out and "evidence envelope" in out


def test_cli_lkb_json_has_categories_and_residual(tmp_path, capsys):
    rc = main(["lkb", "--class", "x86_64_v3", "--profile", str(_profile(tmp_path)), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["class"] == "x86_64_v3"
    assert doc["gaps"][0]["ops"][2]["category"] == "novel"
    assert doc["residual"]["count"] >= doc["residual"]["copy_points"]


def test_cli_lkb_missing_model_is_user_error(tmp_path, capsys):
    rc = main(["lkb", "-m", str(tmp_path / "m.gguf")])
    err = capsys.readouterr().err
    assert rc == 1 and "model file not found" in err and "Traceback" not in err


def test_cli_lkb_model_and_profile_together_refused(tmp_path, capsys):
    assert main(["lkb", "-m", str(tmp_path / "m.gguf"), "--profile", str(_profile(tmp_path))]) == 1
    assert "not both" in capsys.readouterr().err


def test_cli_lkb_unknown_class_is_user_error(capsys):
    assert main(["lkb", "--class", "x86_64_v5"]) == 1
    assert "unknown hardware class" in capsys.readouterr().err


def test_cli_campaign_start_exit_writes_ledger_and_two_lines(tmp_path, capsys):
    folder = tmp_path / "campaigns"
    assert main(["lkb", "--class", "x86_64_v3", "campaign", "start", "v3_tmpl", "--dir", str(folder),
                 "--ttbp", "1.5"]) == 0
    assert main(["lkb", "--class", "x86_64_v3", "campaign", "start", "v3_tmpl", "--dir", str(folder)]) == 1
    capsys.readouterr()
    assert main(["lkb", "--class", "x86_64_v3", "campaign", "exit", "v3_tmpl", "--dir", str(folder),
                 "--promoted", "linear.kquant_dot/lanes", "--ttpv-speed", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Promoted into the LKB: linear.kquant_dot/lanes"
    assert out[1].startswith("LKB residual delta: ") and out[1].endswith("(+0)")
    ledger = read_toml(folder / "v3_tmpl.toml")
    assert ledger["start"]["ttbp_hours"] == 1.5 and ledger["exit"]["ttpv_speed_hours"] == 4.0
    assert ledger["exit"]["ttbp_hours"] == "unmeasured"
    assert ledger["start"]["coverage_c1"] == "unmeasured"
    assert main(["lkb", "campaign", "exit", "v3_tmpl", "--dir", str(folder)]) == 1


def test_cli_promote_check_refusal_exits_1(capsys):
    rc = main(["lkb", "promote-check", "linear_q4_k_q8_k.avx2", "--no-run"])
    captured = capsys.readouterr()
    assert rc == 1 and "users: fail" in captured.out and "promotion refused" in captured.err


def test_cli_check_real_registry_is_clean(capsys):
    assert main(["lkb", "check"]) == 0
    assert "variants in a family point" in capsys.readouterr().out
