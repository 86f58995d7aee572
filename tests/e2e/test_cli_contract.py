"""The README's command-line and Python entry points as a user meets them.

README: "Exit codes: 0 ok, 1 user error (one line on stderr), 2 usage, 3 internal error" and "From Python:
`import kernelmap.runtime as km; m = km.load(); text, stats = m.generate("Hello", 32)`". The usage and user-error
codes run the real `kernelmap` process (a user error: one line, location first, and CONVENTIONS.md's optional
`hint:` line); the internal-error code needs a bug, so that case registers a command that
raises inside the CLI's own main(). generate() runs the default model and must give the text of llama.cpp's greedy
tokens (tests/fixtures/llama_fa/greedy.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "llama_fa" / "greedy.json"


def _kernelmap(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelmap", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [["no-such-command"], ["run", "--no-such-option"], ["run", "-n", "many"]],
                         ids=["command", "option", "value"])
def test_usage_errors_exit_2_with_the_usage_line(args):
    proc = _kernelmap(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Usage: kernelmap" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_user_error_exits_1_with_one_line_naming_the_file(tmp_path):
    missing = tmp_path / "missing.gguf"
    proc = _kernelmap("run", "-m", str(missing), "-p", "Hello", "-n", "1")
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()  # CONVENTIONS.md: one line, location first; an optional hint line
    assert lines[0].startswith(f"error: {missing}: "), proc.stderr
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("hint: ")), proc.stderr


def test_internal_error_exits_3_with_the_traceback_and_a_bug_line(capsys):
    from kernelmap.cli import cli, main

    @cli.command("boom-for-test")
    def boom() -> None:
        raise ZeroDivisionError("a bug")

    try:
        code = main(["boom-for-test"])
    finally:
        cli.commands.pop("boom-for-test", None)
    err = capsys.readouterr().err
    assert code == 3
    assert "Traceback" in err and "ZeroDivisionError: a bug" in err
    assert err.strip().splitlines()[-1].startswith("error: internal error (a bug in kernelmap)")
    assert isinstance(cli, click.Group) and "boom-for-test" not in cli.commands


def test_python_generate_gives_llama_cpp_greedy_text():
    import kernelmap.runtime as km

    case = json.loads(FIXTURE.read_text())["prompts"][0]
    n = 16
    with km.load(threads=2, n_ctx=256) as m:
        text, stats = m.generate(case["text"], n)
        want = m.tokenizer.decode(case["continuation"][:n])
    assert stats.tokens == case["continuation"][:n]
    assert stats.prompt_tokens == len(case["tokens"]) and stats.generated_tokens == n
    assert text == want, (text, want)
