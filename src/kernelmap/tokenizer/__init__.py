"""Tokenizer and chat templates from GGUF metadata: text <-> token ids, llama.cpp-exact.

`Tokenizer.from_metadata(md)` builds the tokenizer ("llama" SentencePiece BPE or "gpt2" byte-level
BPE); `StreamDecoder` turns generated ids into text safely; `template_for_metadata(md).render(...)`
formats a chat from templates kept as data. Nothing here executes the GGUF's own Jinja template.
"""

from kernelmap.tokenizer.chat import ChatTemplate, embedded_template, load_template, template_for_metadata
from kernelmap.tokenizer.stream import StreamDecoder
from kernelmap.tokenizer.tokenizer import Tokenizer

__all__ = ["Tokenizer", "StreamDecoder", "ChatTemplate", "load_template", "template_for_metadata",
           "embedded_template"]
