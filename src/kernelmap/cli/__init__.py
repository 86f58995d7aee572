"""The `kernelmap` command line: one typer app; each command lives in its own module and registers itself.

Exit codes: 0 ok, 1 user error (one line on stderr, no traceback), 2 usage error (typer), 3 bug
(traceback). Data goes to stdout, messages to stderr.
"""

from __future__ import annotations

import importlib
import sys
import traceback

import typer

from kernelmap.errors import KernelmapError

__all__ = ["app", "main"]

app = typer.Typer(
    name="kernelmap",
    help="Kernelmap: compile a GGUF model into a standalone C program, with every kernel choice explained.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines `register(app)`; order is the order of `kernelmap --help`.
_COMMAND_MODULES: list[str] = [
]


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; map user errors to exit 1 and bugs to exit 3."""
    _register_all()
    try:
        app(args=argv, standalone_mode=False)
    except KernelmapError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # typer/click exits (usage errors are 2)
        return int(exc.code or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last-resort bug report
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click.exceptions.Abort):
            return 1
        traceback.print_exc()
        print("error: internal error (a bug in kernelmap); please report it with the traceback above",
              file=sys.stderr)
        return 3
    return 0


def entry() -> None:
    sys.exit(main())
