"""Synthetic models, quantization part: turn the F16 source into each preset with llama.cpp's own quantizer.

Input: the source GGUF, preset names (synth/dims.json: F16, Q8_0, Q4_0, Q4_K_M) and the peer's Python
(llama-cpp-python; `--peer-python`, $KERNELMAP_PEER_PYTHON, or .venv-peer/bin/python beside the working
directory). Output: one GGUF per preset, written by llama.cpp in a child process (so its file is exactly
what a user would download), installed atomically. The F16 preset is the source itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from kernelmap.errors import ModelError, closest
from kernelmap.synth.model import presets

__all__ = ["PEER_ENV", "peer_python", "quantize"]

PEER_ENV = "KERNELMAP_PEER_PYTHON"
_SCRIPT = Path(__file__).resolve().parent / "peer_quantize.py"


def peer_python(given: str | None = None) -> Path:
    """The peer's Python: the argument, $KERNELMAP_PEER_PYTHON, or ./.venv-peer/bin/python."""
    path = Path(given or os.environ.get(PEER_ENV) or Path.cwd() / ".venv-peer" / "bin" / "python")
    if not path.is_file():
        raise ModelError("the peer's Python (llama-cpp-python) was not found", path=path, pointer="--peer-python",
                         hint=f"`make parity` builds .venv-peer; or pass --peer-python / set {PEER_ENV}")
    return path


def quantize(source: Path, out: Path, preset: str, *, python: Path, threads: int = 1) -> Path:
    """Write `out` as `preset` of `source` (a copy for the source's own preset); atomic."""
    table = presets()
    if preset not in table:
        near = closest(preset, list(table))
        raise ModelError("unknown preset", pointer="--preset", value=preset, expected=sorted(table),
                         hint=f"closest: {near}" if near else None)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        if table[preset].get("source"):
            shutil.copyfile(source, tmp)
        else:
            proc = subprocess.run([str(python), "-P", str(_SCRIPT), str(source), str(tmp),
                                   str(table[preset]["ftype"]), str(threads)],
                                  capture_output=True, text=True, timeout=3600)
            if proc.returncode != 0 or not tmp.is_file():
                msg = (proc.stderr.strip().splitlines() or ["no message"])[-1]
                raise ModelError(f"llama.cpp's quantizer failed: {msg}", path=source, pointer="--preset", value=preset)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


if __name__ == "__main__":  # pragma: no cover - manual use
    sys.exit("use `kernelmap synth`")
