"""Tokenizer and chat templates from GGUF metadata: text <-> token ids, llama.cpp-exact.

`Tokenizer.from_metadata(md)` builds the tokenizer (SentencePiece-style BPE or BPE with merge ranks
and the pre-tokenizer the GGUF names); `StreamDecoder` turns generated ids into text safely;
`choose_template(md).template.render(...)` formats a chat from templates kept as data, picked by the
family of the GGUF's own Jinja template, which is never executed.
"""

from kernelmap.tokenizer.chat import (
    ChatTemplate,
    TemplateChoice,
    choose_template,
    detect_family,
    embedded_template,
    load_template,
    template_for_metadata,
)
from kernelmap.tokenizer.stream import StreamDecoder
from kernelmap.tokenizer.tokenizer import Tokenizer

__all__ = ["Tokenizer", "StreamDecoder", "ChatTemplate", "TemplateChoice", "load_template", "template_for_metadata",
           "choose_template", "detect_family", "embedded_template"]
