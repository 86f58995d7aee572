"""Suite-wide test setup: import paths, an isolated build cache, slow tests, the real model, the ISA line.

- tests/support (shared helpers) and tests/kernels (kernel_harness and its friends) are importable
  from every test directory.
- The kernel and model build caches go to a per-session temporary directory unless KERNELMAP_CACHE
  is already set, so the suite never depends on (or pollutes) the user's cache (it only copies the
  user cache's content-addressed audit entries, see below); the directory is removed when the run ends.
- Tests marked `slow` run only with KERNELMAP_SLOW=1 (`make test-slow`); `make test` skips them with
  that reason.
- `model_path` is the default model's GGUF (kernelmap.runtime.default_model_path()); a missing model
  package is an error, not a skip (`make test` installs it).
- At the end of the run one line names every kernel variant and ISA level the run could not check
  because the CPU (or KERNELMAP_ISA) lacks features. Under pytest-xdist (`make test` runs two workers)
  each worker sends what it noted to the controller with its results (pytest_sessionfinish ->
  pytest_testnodedown), so the line is the same as a serial run's.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _sub in ("kernels", "support"):  # support first on sys.path
    sys.path.insert(0, str(_TESTS / _sub))

if "KERNELMAP_CACHE" not in os.environ:
    os.environ["KERNELMAP_CACHE"] = tempfile.mkdtemp(prefix="km-test-cache-")
    # Removed when this process exits (the xdist workers inherit the variable and share this directory; only the
    # process that made it removes it). Left behind, every run kept its 1-3 GB of compiled models and bundles in
    # /tmp: 269 of them had filled this machine's disk. KERNELMAP_KEEP_TEST_CACHE=1 keeps it to inspect a build.
    if not os.environ.get("KERNELMAP_KEEP_TEST_CACHE"):
        import atexit
        import shutil

        atexit.register(shutil.rmtree, os.environ["KERNELMAP_CACHE"], True)
    # One exception: the audit's C-definition entries (gcc -aux-info of every kernel source, ~45 s on two cores)
    # that `make audit` has just written to the user cache are copied in. They are content-addressed (compiler
    # version, source, headers, flags), so an entry either describes the very file it is looked up for or is
    # never hit; the kernel and model builds stay isolated.
    try:
        from platformdirs import user_cache_dir

        _user_cdefs = Path(user_cache_dir("kernelmap")) / "cdefs"
        if _user_cdefs.is_dir():
            import shutil

            shutil.copytree(_user_cdefs, Path(os.environ["KERNELMAP_CACHE"]) / "cdefs")
    except (ImportError, OSError):
        pass  # an optimisation only: the audit tests recompute what is missing

SLOW_ENV = "KERNELMAP_SLOW"
# skip reasons of the form "<map> [<variant>]: host lacks <features>" (kernel_harness and older tests)
_HOST_LACKS = re.compile(r"^(?P<map>\S+) \[(?P<variant>[^\]]+)\]: (?:host lacks )+(?P<missing>[\w, ]+)$")


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files (generated C, traces) instead of comparing against them")


def pytest_configure(config):
    """Under KERNELMAP_SANITIZE=1, re-exec pytest with the ASan/UBSan runtimes preloaded."""
    from kernelmap.build.driver import reexec_under_sanitizer

    reexec_under_sanitizer()


def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` are skipped unless KERNELMAP_SLOW=1 (`make test-slow` sets it)."""
    if os.environ.get(SLOW_ENV, "") not in ("", "0"):
        return
    skip = pytest.mark.skip(reason=f"slow: runs in `make test-slow` ({SLOW_ENV}=1)")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def model_path() -> str:
    """The default model's GGUF path (the model package is a dependency: missing is an error)."""
    from kernelmap.runtime import default_model_path

    return str(default_model_path())


def _skipped_for_isa(terminalreporter) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        m = _HOST_LACKS.match(reason.removeprefix("Skipped: "))
        if m:
            what = f"{m['map']}[{m['variant']}]"
            found.setdefault(what, set()).update(f.strip() for f in m["missing"].split(","))
    return found


def pytest_sessionfinish(session):
    """In an xdist worker: hand what this worker noted as unchecked to the controller."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        from isa_report import unchecked

        output["km_unchecked"] = {what: sorted(missing) for what, missing in unchecked().items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """In the xdist controller: merge a finished worker's unchecked notes (see pytest_sessionfinish)."""
    from isa_report import note_unchecked

    for what, missing in getattr(node, "workeroutput", {}).get("km_unchecked", {}).items():
        note_unchecked(what, missing)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line naming the variants and ISA levels this run could not check for lack of CPU features."""
    from isa_report import note_unchecked, summary_line

    for what, missing in _skipped_for_isa(terminalreporter).items():
        note_unchecked(what, missing)
    line = summary_line()
    if line:
        terminalreporter.write_line(line, yellow=True, bold=True)
