"""What served a run, read from each engine's own endpoints: vLLM, Ollama and llama.cpp's server as stand-ins on
loopback serving the JSON their documentation gives (abridged), llama-cpp-python for real (tests/e2e), and bench
record writing it into the cassette header."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.doctor import diagnose
from bench.catalog.driver.record_run import record
from bench.catalog.driver.server_info import quantization_in, read_server, summary
from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import ServedModel
from bench.scorer.checked_catalog import load_catalog
from tests.support.serve import serve_on_loopback

# vLLM's OpenAI server: GET /v1/models (ModelCard: owned_by "vllm", root, max_model_len) and GET /version.
VLLM = {
    "GET /v1/models": {
        "object": "list",
        "data": [
            {
                "id": "Qwen/Qwen2.5-7B-Instruct-AWQ",
                "object": "model",
                "created": 1733000000,
                "owned_by": "vllm",
                "root": "/models/Qwen2.5-7B-Instruct-AWQ",
                "parent": None,
                "max_model_len": 32768,
                "permission": [],
            }
        ],
    },
    "GET /version": {"version": "0.6.4.post1"},
}

# Ollama: GET /api/version, POST /api/show {"model": ...} (details, model_info, parameters), and its OpenAI list.
OLLAMA = {
    "GET /api/version": {"version": "0.5.1"},
    "GET /v1/models": {"object": "list", "data": [{"id": "llama3.1:8b", "object": "model", "owned_by": "library"}]},
    "POST /api/show": {
        "modelfile": "FROM llama3.1:8b",
        "parameters": 'num_ctx                        8192\nstop                           "<|eot_id|>"',
        "template": "{{ .Prompt }}",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "llama",
            "families": ["llama"],
            "parameter_size": "8.0B",
            "quantization_level": "Q4_K_M",
        },
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    },
}

# llama.cpp's llama-server: GET /props and GET /v1/models (with `meta`).
LLAMA_CPP = {
    "GET /props": {
        "default_generation_settings": {"id": 0, "n_ctx": 8192, "params": {"n_predict": -1, "temperature": 0.8}},
        "total_slots": 4,
        "model_path": "/home/someone/models/Qwen2.5-7B-Instruct-Q8_0.gguf",
        "chat_template": "{% for message in messages %}",
        "build_info": "b4567-abcdef0",
    },
    "GET /v1/models": {
        "object": "list",
        "data": [
            {
                "id": "qwen",
                "object": "model",
                "owned_by": "llamacpp",
                "meta": {"vocab_type": 2, "n_vocab": 152064, "n_ctx_train": 32768, "n_params": 7615616512},
            }
        ],
    },
}


def fake_server(answers: dict[str, Any], seen: list[str]) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        line = f"{request.method} {request.path}"
        seen.append(line)
        if line == "POST /api/show":
            seen.append(f"show {(await request.json()).get('model')}")
        if line in answers:
            return web.json_response(answers[line])
        return web.json_response({"error": "not found"}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[dict[str, Any]], Any]]:
    runners = []
    seen: list[str] = []

    async def start(answers: dict[str, Any]) -> tuple[str, list[str]]:
        runner, url = await serve_on_loopback(fake_server(answers, seen))
        runners.append(runner)
        return url, seen

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_vllm_is_read_from_its_models_list_and_version(serve: Any) -> None:
    url, _ = await serve(VLLM)
    info = await read_server(url + "/v1", None, ["Qwen/Qwen2.5-7B-Instruct-AWQ"])
    assert (info.engine, info.version) == ("vllm", "0.6.4.post1")
    assert info.models == [
        ServedModel(
            id="Qwen/Qwen2.5-7B-Instruct-AWQ", context_length=32768, quantization="AWQ", file="Qwen2.5-7B-Instruct-AWQ"
        )
    ]
    assert info.sources == ["GET /v1/models", "GET /version"]


async def test_ollama_is_asked_api_show_for_each_model_of_the_run(serve: Any) -> None:
    url, seen = await serve(OLLAMA)
    info = await read_server(url, None, ["llama3.1:8b"])
    assert (info.engine, info.version) == ("ollama", "0.5.1")
    [model] = info.models
    assert (model.context_length, model.trained_context, model.quantization) == (8192, 131072, "Q4_K_M")
    assert (model.parameters, model.family, model.format) == ("8.0B", "llama", "gguf")
    assert "show llama3.1:8b" in seen and "POST /api/show" in info.sources


async def test_llama_cpp_server_is_read_from_props_and_the_models_meta(serve: Any) -> None:
    url, seen = await serve(LLAMA_CPP)
    info = await read_server(url, "sk-probe-key", ["qwen"])
    assert (info.engine, info.version, info.slots) == ("llama.cpp", "b4567-abcdef0", 4)
    [model] = info.models
    assert (model.context_length, model.trained_context, model.parameters) == (8192, 32768, "7615616512")
    # The quantization from the model file's name; the file's name only, never the path (a user's home).
    assert (model.quantization, model.file) == ("Q8_0", "Qwen2.5-7B-Instruct-Q8_0.gguf")
    assert "someone" not in str(info)
    # Only a server that said it is Ollama is sent a POST.
    assert not [line for line in seen if line.startswith("POST")]
    assert summary(info)[0].startswith("llama.cpp b4567-abcdef0, 4 slot(s) (from GET /props, GET /v1/models)")


async def test_a_server_that_describes_nothing_is_no_error(serve: Any) -> None:
    url, _ = await serve({"GET /props": ["not", "an", "object"], "GET /version": "text"})
    info = await read_server(url, None, ["m"])
    assert info.engine is None and info.models == [] and info.sources == []
    unreachable = await read_server("http://127.0.0.1:9", None, ["m"])  # the discard port: refused at once
    assert unreachable.engine is None


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"),
        ("qwen2.5-7b-instruct-q4_k_m.gguf", "Q4_K_M"),
        ("Meta-Llama-3-8B-Instruct-IQ3_XXS.gguf", "IQ3_XXS"),
        ("model-f16.gguf", "F16"),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "GPTQ-INT4"),
        ("llama3.1:8b", None),
        (None, None),
    ],
)
def test_quantization_from_a_model_files_name(name: str | None, want: str | None) -> None:
    assert quantization_in(name) == want


async def test_record_writes_the_server_into_the_header_and_doctor_shows_it(tmp_path: Path, serve: Any) -> None:
    catalog = load_catalog(None)
    async with await start_sim(catalog=catalog) as sim:
        cfg = RecordConfig(upstream=sim.url, models=["oracle"], out=str(tmp_path), tests=["tools.weather_paris"])
        summary_ = await record(cfg, catalog)
    assert summary_.cassette is not None
    header = CassetteReader(summary_.cassette).header
    # The simulator is no engine bench knows: its models list is what it said.
    assert header.server.engine is None and [m.id for m in header.server.models] == ["oracle"]  # type: ignore[union-attr]
    assert header.server.sources == ["GET /v1/models"]  # type: ignore[union-attr]
    url, _ = await serve(LLAMA_CPP)
    checks = {c.name: c for c in await diagnose(url, None, "qwen")}
    assert checks["server"].ok and "quantization Q8_0" in checks["server"].detail and not checks["server"].required
