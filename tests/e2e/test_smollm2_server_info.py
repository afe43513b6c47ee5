"""What serves the real SmolLM2 model, as llama-cpp-python's server describes itself (its OpenAPI document and
/v1/models): engine and version, read without sending the model a request."""

from __future__ import annotations

import importlib.metadata

import pytest

from bench.catalog.driver.server_info import read_server

pytestmark = pytest.mark.llm


async def test_llama_cpp_python_says_its_engine_version_and_model(smollm2: str) -> None:
    info = await read_server(smollm2, None, ["smollm2"])
    assert info.engine == "llama-cpp-python"
    assert info.version == importlib.metadata.version("llama_cpp_python")
    assert [m.id for m in info.models] == ["smollm2"]
    assert "GET /openapi.json" in info.sources and "GET /v1/models" in info.sources
