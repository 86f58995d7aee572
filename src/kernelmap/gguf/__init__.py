"""GGUF input stage: a validated, lazy, mmap-backed reader and the GGML type table.

`open_gguf(path)` is the entry point; nothing here interprets model metadata or writes files.
"""

from kernelmap.gguf.reader import GGUFArray, GGUFFile, TensorInfo, open_gguf, open_gguf_bytes
from kernelmap.gguf.types import GGML_TYPES, GGMLType, ValueType, ggml_type, type_name

__all__ = ["open_gguf", "open_gguf_bytes", "GGUFFile", "GGUFArray", "TensorInfo", "ValueType", "GGMLType",
           "GGML_TYPES", "ggml_type", "type_name"]
