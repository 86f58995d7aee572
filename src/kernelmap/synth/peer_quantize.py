"""Run by the peer's Python (llama-cpp-python), not by kernelmap: quantize a GGUF with llama.cpp's own quantizer.

Usage: PEER_PYTHON -P peer_quantize.py SRC DST FTYPE NTHREAD. Exits 0 when llama.cpp wrote DST, else 1
with llama.cpp's return code on stderr. Imports only the peer's package and the standard library
(the peer's environment does not have kernelmap installed).
"""

import ctypes
import sys


def main() -> int:
    src, dst, ftype, nthread = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    import llama_cpp as peer

    @peer.llama_log_callback
    def quiet(_level, _text, _ud):
        return None

    peer.llama_log_set(quiet, None)
    params = peer.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = nthread
    rc = peer.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        print(f"quantize returned {rc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
