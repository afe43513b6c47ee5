"""What served a run, read from the serving engine's own endpoints at record time (and by `bench doctor`).

Each engine describes itself at its own URLs: llama.cpp's server at `/props` (and `meta` in `/v1/models`), vLLM at
`/version` and in `/v1/models` (`max_model_len`), Ollama at `/api/version` and `/api/show`, llama-cpp-python in its
OpenAPI document. `read_server` asks them all (GETs, and Ollama's `/api/show` POST only once Ollama answered), each
bounded in time and size, and a registry of readers (`@engine`) turns what answered into one `ServerInfo`. Anything
else answers nothing useful and the run goes on: this never fails a recording.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from bench.catalog.driver.preflight import api_base, auth_headers
from bench.core.cassette.records import ServedModel, ServerInfo

PROBE_TIMEOUT_S = 5.0
MAX_BODY = 1 << 20  # an answer past this is not a self-description worth reading
MAX_TEXT = 200  # every string kept is cut to this

GETS = ("/v1/models", "/props", "/version", "/api/version", "/openapi.json")

# Quantization names as GGUF files and Ollama spell them (Q4_K_M, IQ3_XXS, Q8_0, F16, BF16...), and as Hugging Face
# repositories served by vLLM name theirs (-AWQ, -GPTQ-Int4, -FP8).
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])(I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32|AWQ|GPTQ(?:-INT[48])?|FP8|W4A16|W8A8)(?![A-Za-z0-9])",
    re.IGNORECASE,
)


@dataclass
class Answers:
    """What each endpoint answered: JSON objects only, by request line ("GET /props")."""

    found: dict[str, dict[str, Any]] = field(default_factory=dict)
    shown: dict[str, dict[str, Any]] = field(default_factory=dict)  # Ollama's /api/show, by model

    def get(self, line: str) -> dict[str, Any] | None:
        return self.found.get(line)


Reader = Callable[[Answers], ServerInfo | None]
ENGINES: dict[str, Reader] = {}


def engine(name: str) -> Callable[[Reader], Reader]:
    """Register a reader: it returns a ServerInfo when the answers are its engine's, else None. Readers are asked in
    registration order; the first that recognises the server wins."""

    def register(fn: Reader) -> Reader:
        if name in ENGINES:
            raise ValueError(f"server engine {name!r} registered twice")
        ENGINES[name] = fn
        return fn

    return register


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value[:MAX_TEXT]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _last_part(path: Any) -> str | None:
    text = _text(path)
    return None if text is None else re.split(r"[\\/]", text.rstrip("/\\"))[-1] or None


def quantization_in(name: str | None) -> str | None:
    """The quantization a model file's name carries (SmolLM2-135M-Instruct.Q4_1.gguf -> Q4_1), else None."""
    if not name:
        return None
    found = _QUANT.findall(name)
    return found[-1].upper() if found else None


def _listed(answers: Answers) -> list[dict[str, Any]]:
    doc = answers.get("GET /v1/models") or {}
    data = doc.get("data")
    return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)] if isinstance(data, list) else []


@engine("ollama")
def _ollama(answers: Answers) -> ServerInfo | None:
    version = answers.get("GET /api/version")
    if version is None or "version" not in version:
        return None
    models = []
    for name, shown in answers.shown.items():
        details = _obj(shown.get("details"))
        info = _obj(shown.get("model_info"))
        arch = info.get("general.architecture")
        given = shown.get("parameters")  # Modelfile lines: "num_ctx 8192\nstop ..."
        params = given[:MAX_BODY] if isinstance(given, str) else ""
        num_ctx = re.search(r"^num_ctx\s+(\d+)", params, re.M)
        models.append(
            ServedModel(
                id=name,
                context_length=int(num_ctx[1]) if num_ctx else None,
                trained_context=_int(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None,
                quantization=_text(details.get("quantization_level")),
                parameters=_text(details.get("parameter_size")),
                family=_text(details.get("family")),
                format=_text(details.get("format")),
            )
        )
    return ServerInfo(engine="ollama", version=_text(version.get("version")), models=models)


@engine("vllm")
def _vllm(answers: Answers) -> ServerInfo | None:
    listed = _listed(answers)
    version = answers.get("GET /version")
    # vLLM's models list says who owns them and how long a request may be; `/version` alone is too common a URL.
    if not any(m.get("owned_by") == "vllm" or "max_model_len" in m for m in listed):
        return None
    models = [
        ServedModel(
            id=str(m["id"])[:MAX_TEXT],
            context_length=_int(m.get("max_model_len")),
            file=_last_part(m.get("root")),
            quantization=quantization_in(_text(m.get("root")) or str(m["id"])),
        )
        for m in listed
    ]
    return ServerInfo(engine="vllm", version=_text((version or {}).get("version")), models=models)


@engine("llama.cpp")
def _llama_cpp(answers: Answers) -> ServerInfo | None:
    props = answers.get("GET /props")
    if props is None or not ({"default_generation_settings", "total_slots", "model_path"} & set(props)):
        return None
    settings = _obj(props.get("default_generation_settings"))
    params = _obj(settings.get("params"))
    n_ctx = _int(settings.get("n_ctx")) or _int(params.get("n_ctx"))
    path = props.get("model_path") or settings.get("model")
    models = []
    for m in _listed(answers) or [{"id": _last_part(path) or "?"}]:
        meta = _obj(m.get("meta"))
        models.append(
            ServedModel(
                id=str(m["id"])[:MAX_TEXT],
                context_length=n_ctx,
                trained_context=_int(meta.get("n_ctx_train")),
                quantization=quantization_in(_text(path) or str(m["id"])),
                parameters=_text(meta.get("n_params")),
                format="gguf",
                file=_last_part(path),
                kv_cache_type=_text(props.get("cache_type_k")),
            )
        )
    return ServerInfo(
        engine="llama.cpp", version=_text(props.get("build_info")), slots=_int(props.get("total_slots")), models=models
    )


@engine("llama-cpp-python")
def _llama_cpp_python(answers: Answers) -> ServerInfo | None:
    doc = answers.get("GET /openapi.json") or {}
    info = _obj(doc.get("info"))
    title = info.get("title")
    if not (isinstance(title, str) and "llama.cpp python" in title.lower()):
        return None
    models = [
        ServedModel(id=str(m["id"])[:MAX_TEXT], quantization=quantization_in(str(m["id"]))) for m in _listed(answers)
    ]
    return ServerInfo(engine="llama-cpp-python", version=_text(info.get("version")), models=models)


async def _json(resp: aiohttp.ClientResponse) -> dict[str, Any] | None:
    if resp.status >= 400:
        return None
    body = await resp.content.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


async def _get(
    session: aiohttp.ClientSession, root: str, path: str, headers: Mapping[str, str]
) -> dict[str, Any] | None:
    try:
        async with session.get(root + path, headers=dict(headers), allow_redirects=False) as resp:
            return await _json(resp)
    except (aiohttp.ClientError, TimeoutError, UnicodeError, ValueError):
        return None


async def _show(
    session: aiohttp.ClientSession, root: str, model: str, headers: Mapping[str, str]
) -> dict[str, Any] | None:
    try:
        async with session.post(root + "/api/show", json={"model": model}, headers=dict(headers)) as resp:
            return await _json(resp)
    except (aiohttp.ClientError, TimeoutError, UnicodeError, ValueError):
        return None


async def gather_answers(upstream: str, api_key: str | None, models: Sequence[str]) -> Answers:
    root = api_base(upstream)
    headers = auth_headers(api_key)
    answers = Answers()
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        got = await asyncio.gather(*(_get(session, root, path, headers) for path in GETS))
        answers.found = {f"GET {path}": doc for path, doc in zip(GETS, got, strict=True) if doc is not None}
        if answers.get("GET /api/version") is not None:
            # Ollama: its per-model description needs a POST, asked only of a server that said it is Ollama.
            names = list(models) or [m["id"] for m in _listed(answers)]
            shown = await asyncio.gather(*(_show(session, root, name, headers) for name in names[:32]))
            answers.shown = {n: doc for n, doc in zip(names, shown, strict=False) if doc is not None}
    return answers


def describe(answers: Answers) -> ServerInfo:
    """The first registered reader's view of the answers, with the endpoints that answered; an unrecognised server
    keeps its listed models."""
    sources = sorted(answers.found) + (["POST /api/show"] if answers.shown else [])
    for read in ENGINES.values():
        info = read(answers)
        if info is not None:
            info.sources = sources
            return info
    return ServerInfo(sources=sources, models=[ServedModel(id=str(m["id"])[:MAX_TEXT]) for m in _listed(answers)])


async def read_server(upstream: str, api_key: str | None, models: Sequence[str] = ()) -> ServerInfo:
    """What serves `upstream`, as its engine says (a ServerInfo with no engine when nothing recognisable answered)."""
    info = describe(await gather_answers(upstream, api_key, models))
    if models:
        # Only the run's models: a server that lists hundreds keeps the header small.
        wanted = set(models)
        info.models = [m for m in info.models if m.id in wanted] or info.models[: len(models)]
    return info


def summary(info: ServerInfo) -> list[str]:
    """One line for the server and one per model, in words (bench doctor, reports)."""
    head = f"{info.engine or 'not recognised'}" + (f" {info.version}" if info.version else "")
    if info.slots:
        head += f", {info.slots} slot(s)"
    lines = [head + (f" (from {', '.join(info.sources)})" if info.sources else " (no endpoint described it)")]
    for m in info.models:
        facts = [
            f"context {m.context_length}" if m.context_length else "",
            f"trained context {m.trained_context}" if m.trained_context else "",
            f"quantization {m.quantization}" if m.quantization else "",
            f"{m.parameters} parameters" if m.parameters else "",
            m.family or "",
            f"KV cache {m.kv_cache_type}" if m.kv_cache_type else "",
            f"file {m.file}" if m.file else "",
        ]
        lines.append(f"{m.id}: " + (", ".join(f for f in facts if f) or "no details"))
    return lines
