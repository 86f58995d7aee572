"""The peer (llama.cpp) is built to run on this CPU: pinned version, from source, explicit ISA flags, never AMX.

A llama.cpp built with native flags on a CPU with AMX repacks weights for AMX, segfaults on batches of 2+
rows and rounds differently; `make peer` must not produce that build (tests/fixtures/peer_build.py chooses
the flags, the Makefile passes them), and the fixture scripts record which build produced each fixture.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _peer_build():
    spec = importlib.util.spec_from_file_location("peer_build", ROOT / "tests" / "fixtures" / "peer_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SAPPHIRE_RAPIDS = {"avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vbmi",
                   "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"}


@pytest.mark.parametrize(("features", "on", "off"), [
    (SAPPHIRE_RAPIDS, {"GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_BF16", "GGML_AVX512_VBMI", "GGML_AVX2"},
     {"GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_AVX_VNNI", "GGML_NATIVE"}),
    ({"avx", "avx2", "fma", "f16c", "bmi2"}, {"GGML_AVX2", "GGML_FMA", "GGML_F16C"},
     {"GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AMX_INT8", "GGML_NATIVE"}),
    (set(), set(), {"GGML_AVX", "GGML_AVX2", "GGML_AVX512", "GGML_AMX_TILE", "GGML_NATIVE"}),
])
def test_peer_cmake_args_follow_the_cpu_and_never_enable_amx_or_native(features, on, off):
    args = dict(a.removeprefix("-D").split("=") for a in _peer_build().cmake_args(features))
    assert {k for k in on if args.get(k) != "ON"} == set(), args
    assert {k for k in off if args.get(k) != "OFF"} == set(), args
    assert not any("native" in a.lower() and "OFF" not in a for a in _peer_build().cmake_args(features))


def test_make_peer_builds_the_pinned_version_from_source_with_those_flags():
    proc = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), ".venv-peer/.stamp", f"PY={sys.executable}"],
                          capture_output=True, text=True, check=True)
    text = proc.stdout
    pb = _peer_build()
    assert "--no-binary llama-cpp-python" in text and "--no-cache-dir" in text, text
    assert "CMAKE_ARGS=" in text and "peer_build.py --cmake-args" in text, text
    assert "peer_build.py --version" in text and pb.PEER_VERSION == "0.3.36", text
    assert "--record .venv-peer/peer-build.json" in text, text
    version = subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "peer_build.py"), "--version"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "0.3.36"


def test_peer_info_refuses_an_amx_build(monkeypatch):
    import types

    fake = types.SimpleNamespace(__version__="0.3.36", llama_print_system_info=lambda: b"CPU : AVX512 = 1 | AMX_INT8 = 1 |")
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    with pytest.raises(SystemExit, match="built with AMX"):
        _peer_build().peer_info()


def test_avx2_peer_is_the_avx512_hosts_flags_with_every_avx512_option_off():
    """`make peer-avx2` (--isa avx2) builds llama.cpp's AVX2 path on any AVX2 CPU: on an AVX-512 one its flags are
    exactly those the committed llama_long_avx2 fixture records for its peer, the build policy llama-cpu-avx2 matches."""
    import json

    pb = _peer_build()
    args = dict(a.removeprefix("-D").split("=") for a in pb.cmake_args(SAPPHIRE_RAPIDS, "avx2"))
    assert {k for k, v in args.items() if k.startswith("GGML_AVX512") and v != "OFF"} == set(), args
    assert args["GGML_AVX2"] == "ON" and args["GGML_AMX_INT8"] == "OFF" and args["GGML_NATIVE"] == "OFF", args
    assert pb.cmake_args({"avx", "avx2", "fma", "f16c", "bmi2"}, "avx2") == pb.cmake_args({"avx", "avx2", "fma", "f16c", "bmi2"})
    recorded = json.loads((ROOT / "tests" / "fixtures" / "llama_long_avx2" / "t1.json").read_text(encoding="utf-8"))
    assert pb.cmake_args(SAPPHIRE_RAPIDS, "avx2") == recorded["peer"]["build"]["cmake_args"]
    with pytest.raises(ValueError, match="isa"):
        pb.cmake_args(SAPPHIRE_RAPIDS, "avx512")
    proc = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), ".venv-peer-avx2/.stamp", f"PY={sys.executable}"],
                          capture_output=True, text=True, check=True)
    assert "--cmake-args --isa avx2" in proc.stdout and "--record .venv-peer-avx2/peer-build.json" in proc.stdout, proc.stdout
    assert "--isa avx2" in proc.stdout.split("--record", 1)[1], proc.stdout
