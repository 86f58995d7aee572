"""The `kernelmap` command line: one click group; each command lives in its own module and registers itself.

Exit codes: 0 ok, 1 user error (one line on stderr, no traceback), 2 usage error, 3 bug
(traceback). Data goes to stdout, messages to stderr.
"""

from __future__ import annotations

import importlib
import sys
import traceback

import click

from kernelmap.errors import KernelmapError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="kernelmap")
def cli() -> None:
    """Kernelmap: compile a GGUF model into a standalone C program, with every kernel choice explained.

    Example: kernelmap run -m gemma-3-270m-q4_k_m.gguf -p "The capital of France is" -n 32
    """


# Each module defines `register(cli)`; the order here is the order of `kernelmap --help`.
_COMMAND_MODULES: list[str] = [
    "kernelmap.cli.run_cmd", "kernelmap.cli.serve_cmd", "kernelmap.cli.parity_cmd",
    "kernelmap.cli.bench_cmd", "kernelmap.cli.kernels_cmd",
    "kernelmap.cli.maps_cmd", "kernelmap.cli.resolve_cmd", "kernelmap.cli.explain_cmd",
    "kernelmap.cli.inspect_cmd",
    "kernelmap.cli.tokenize_cmd",
    "kernelmap.cli.lkb_cmd",
    "kernelmap.cli.synth_cmd",
    "kernelmap.cli.cache_cmd",
]


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(cli)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; map user errors to exit 1 and bugs to exit 3."""
    _register_all()
    try:
        cli.main(args=argv, prog_name="kernelmap", standalone_mode=False)
    except KernelmapError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except click.exceptions.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:  # noqa: BLE001 - last-resort bug report
        traceback.print_exc()
        print("error: internal error (a bug in kernelmap); please report it with the traceback above",
              file=sys.stderr)
        return 3
    return 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
