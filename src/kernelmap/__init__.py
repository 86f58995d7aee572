"""Kernelmap: a CPU-first compiler for LLM inference (GGUF in, generated C out, every kernel choice explained)."""

__version__ = "0.1.0"

__all__ = ["__version__"]
