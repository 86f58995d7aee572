"""CLI input text: prompt bytes from an option, a file or stdin -> a str that is valid Unicode text.

Command-line arguments that are not UTF-8 reach Python as surrogate-escaped str (one lone surrogate per
undecodable byte); files and stdin are read as bytes and decoded strictly. Either way invalid text becomes
a one-line ModelError naming where it came from and the offset of the first bad byte. It does not tokenize.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernelmap.errors import ModelError

__all__ = ["arg_text", "file_text", "stdin_line", "stdin_text"]


def _decode(data: bytes, where: str, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelError(f"{what} is not valid UTF-8 (byte {exc.start}: {exc.reason})", path=where) from None


def arg_text(value: str | None, option: str, what: str = "prompt") -> str | None:
    """The text of a command-line option, refused when its bytes were not UTF-8."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = os.fsencode(value)  # the argument's own bytes (surrogateescape undoes Python's decoding)
        except UnicodeEncodeError:
            raw = value.encode("utf-8", "surrogatepass")
        return _decode(raw, option, what)
    return value


def file_text(path: str, what: str = "prompt") -> str:
    """The text of a file, refused when it is not UTF-8."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read the {what} file: {exc.strerror}", path=path) from None
    return _decode(data, path, what)


def stdin_text(what: str = "text") -> str:
    """All of stdin, refused when it is not UTF-8."""
    return _decode(sys.stdin.buffer.read(), "stdin", what)


def stdin_line(number: int, what: str = "input") -> str | None:
    """The next line of stdin (None at its end), refused when it is not UTF-8; `number` counts from 1."""
    data = sys.stdin.buffer.readline()
    if not data:
        return None
    return _decode(data, f"stdin line {number}", what)
