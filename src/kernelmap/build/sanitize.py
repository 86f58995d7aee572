"""Build helper: run a command with ASan+UBSan kernel builds enabled and their runtimes preloaded.

Usage: `python -m kernelmap.build.sanitize pytest -q tests/kernels` execs the command with
KERNELMAP_SANITIZE=1 and `driver.sanitizer_env()` (LD_PRELOAD of libasan and libubsan), so the
sanitized .so files the build produces can be loaded by ctypes. It does not build anything itself.
"""

from __future__ import annotations

import os
import sys

from kernelmap.build.driver import sanitizer_env
from kernelmap.errors import KernelmapError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Exec argv under the sanitizer environment; returns only on a usage or setup error."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m kernelmap.build.sanitize COMMAND [ARGS...]\n"
              "example: python -m kernelmap.build.sanitize pytest -q tests/kernels", file=sys.stderr)
        return 2
    try:
        env = sanitizer_env()
    except KernelmapError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    sys.stdout.flush()
    try:
        os.execvpe(args[0], args, env)
    except OSError as exc:
        print(f"error: {args[0]}: cannot run: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
