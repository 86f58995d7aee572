"""The test suite itself: no machine-specific paths, no skipped imports of our own code, slow tests and
ISA gaps reported loudly.

- No test file names a path under the developer's home directory: the model comes from
  kernelmap.runtime.default_model_path() (the `model_path` fixture).
- pytest.importorskip of the project's own modules (kernelmap, the default model package, a helper
  module under tests/) is an error: a test that silently never runs is a defect.
- Tests marked `slow` are skipped in `make test` with a reason naming `make test-slow`.
- A run whose target lacks CPU features ends with one line naming every kernel variant it did not check.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
HOME_PREFIX = "/" + "root/"  # split so this file does not match its own check


def _py_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if ".venv" not in p.parts)


def _own_modules() -> set[str]:
    from kernelmap.runtime.model import DEFAULT_MODEL_FILE

    spec = json.loads(DEFAULT_MODEL_FILE.read_text())
    return {"kernelmap", spec["module"]} | {p.stem for p in _py_files()}


def test_no_test_file_names_a_home_directory_path():
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in _py_files()
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if HOME_PREFIX in line]
    assert not offenders, f"machine-specific paths (use the model_path fixture / default_model_path()): {offenders}"


def importorskipped(source: str, own: set[str]) -> list[tuple[int, str]]:
    """(line, module) of every importorskip(<literal>) call whose module's top-level package is in `own`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "importorskip"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            name = node.args[0].value
            if name.split(".")[0] in own:
                found.append((node.lineno, name))
    return found


def test_no_importorskip_of_the_projects_own_modules():
    own = _own_modules()
    offenders = {str(p.relative_to(ROOT)): hits for p in _py_files()
                 if (hits := importorskipped(p.read_text(encoding="utf-8"), own))}
    assert not offenders, f"importorskip of our own modules hides a broken import as a skip: {offenders}"


def test_importorskip_scan_flags_own_modules_only():
    src = ('import pytest\nh = pytest.importorskip("kernel_harness")\nk = pytest.importorskip("kernelmap.gguf")\n'
           't = pytest.importorskip("tomllib")\n')
    assert importorskipped(src, {"kernelmap", "kernel_harness"}) == [(2, "kernel_harness"), (3, "kernelmap.gguf")]


def _pytest(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def test_slow_tests_are_skipped_without_kernelmap_slow_and_say_where_they_run():
    env = {k: v for k, v in os.environ.items() if k != "KERNELMAP_SLOW"}
    proc = _pytest(["-rs", "tests/gguf/test_reader_fuzz.py", "-k", "100k"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout and "make test-slow" in proc.stdout, proc.stdout


def test_run_on_a_target_without_simd_names_every_unchecked_variant_in_one_line():
    """KERNELMAP_ISA=scalar stands in for a host without AVX2/AVX-512: the run's last lines name the
    variants it skipped, with the missing features."""
    env = {**os.environ, "KERNELMAP_ISA": "scalar"}
    proc = _pytest(["tests/kernels/test_residual.py", "-k", "save"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("NOT CHECKED on this CPU")]
    assert len(lines) == 1, proc.stdout
    assert "residual_save_copy[avx2]" in lines[0] and "residual_save_copy[avx512]" in lines[0]
    assert "residual_save_copy[ref]" not in lines[0] and "avx512f" in lines[0]
    assert "residual_add_f32" not in lines[0]  # deselected tests are not reported as unchecked


def test_run_on_a_host_with_every_feature_prints_no_isa_line():
    from kernelmap.target import host_features

    needed = {f for f in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq")}
    env = {k: v for k, v in os.environ.items() if k != "KERNELMAP_ISA"}
    proc = _pytest(["tests/kernels/test_residual.py", "-k", "save"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("NOT CHECKED on this CPU" in proc.stdout) == (not needed <= host_features()), proc.stdout


def test_run_removes_its_build_cache_when_it_ends(tmp_path):
    """The per-run KERNELMAP_CACHE (compiled kernels, models, bundles: 1-3 GB for `make test`) is removed when the
    run ends, also under xdist, whose workers share the controller's directory; every run used to leave it in
    /tmp until the disk was full. KERNELMAP_KEEP_TEST_CACHE=1 keeps it (which shows the run made one here)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELMAP_CACHE", "KERNELMAP_KEEP_TEST_CACHE")}
    for args, keep in (([], False), (["-n", "2"], False), ([], True)):
        tmp = tmp_path / f"tmp{len(args)}{int(keep)}"
        tmp.mkdir()
        run_env = {**env, "TMPDIR": str(tmp), **({"KERNELMAP_KEEP_TEST_CACHE": "1"} if keep else {})}
        proc = _pytest([*args, "tests/kernels/test_residual.py", "-k", "save"], run_env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        left = sorted(d.name for d in tmp.glob("km-test-cache-*"))
        assert len(left) == (1 if keep else 0), (args, keep, left)
