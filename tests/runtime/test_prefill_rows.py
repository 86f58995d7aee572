"""Prefill rows per step: 512 for run / chat / compile (llama.cpp's -ub default), 128 for serve (each KV slot's
sliding-window ring holds window + rows - 1 cells), `-ub` / `--ubatch-size` / `--batch` one option, out of range
refused by name."""

from __future__ import annotations

import click
import pytest

from kernelmap.cli import main
from kernelmap.compiler import DEFAULT_PREFILL_ROWS, CompileOptions


def _batch_option(command: str) -> click.Option:
    from kernelmap.cli import _register_all, cli

    _register_all()
    cmd = cli.commands[command]
    return next(p for p in cmd.params if isinstance(p, click.Option) and p.name == "batch")


def test_run_chat_compile_default_to_512_rows_and_take_ub():
    assert DEFAULT_PREFILL_ROWS == 512 and CompileOptions().max_rows == DEFAULT_PREFILL_ROWS
    for command in ("run", "chat", "compile"):
        opt = _batch_option(command)
        assert opt.default == DEFAULT_PREFILL_ROWS, command
        assert {"-ub", "--ubatch-size", "--batch"} <= set(opt.opts), (command, opt.opts)


def test_serve_defaults_to_128_rows():
    from kernelmap.serve.server import SERVE_PREFILL_ROWS, ServeOptions

    assert SERVE_PREFILL_ROWS == 128 and ServeOptions().compile.max_rows == SERVE_PREFILL_ROWS
    opt = _batch_option("serve")
    assert opt.default == SERVE_PREFILL_ROWS and "-ub" in opt.opts


@pytest.mark.parametrize("value", ["0", "4097"])
def test_ub_out_of_range_is_refused_by_name(capsys, value):
    rc = main(["run", "-ub", value, "-p", "hi", "-n", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "--batch: prefill batch out of range" in err and "1..4096" in err, err
