"""What a model call asked for, beside its messages: the sampling settings and other fields of the body, the tools
offered, the response format, and the headers of the request and the response.

Cassettes are redacted when written (docs/proxy.md, "Secrets"); the same rules are applied again here (secret header
names, query parameters and body fields), so a cassette written by another tool, or before a rule existed, shows no
secret either.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from bench.core.cassette import records
from bench.core.cassette.redact import (
    DEFAULT_SECRET_FIELDS,
    DEFAULT_SECRET_HEADERS,
    SecretSet,
    redact_headers,
    redact_json_fields,
    redact_query,
)
from bench.core.fingerprint import SECRET_QUERY_PARAMS
from bench.view.transcript import clip, pretty

# Fields shown elsewhere: the messages (the transcript), the tools and the response format (their own parts).
_MESSAGES = frozenset({"messages", "input", "instructions", "prompt"})
_APART = frozenset({"tools", "functions", "response_format"})
MAX_TOOLS = 200  # tools listed one by one; past this the rest are counted
NOT_JSON = "(the request body is not a JSON object: the raw request shows it)"


class Tool(msgspec.Struct):
    name: str
    description: str
    parameters: str  # pretty-printed JSON schema


class RequestView(msgspec.Struct):
    method: str
    path: str  # with its query, secret parameters redacted
    body_bytes: int
    settings: str  # every other field of the body, pretty-printed (model, temperature, max_tokens, stream, seed...)
    tools: list[Tool]
    tools_left_out: int
    response_format: str | None
    headers: list[list[str]]
    response_headers: list[list[str]]


def _headers(headers: list[list[str]], where: str) -> list[list[str]]:
    shown = redact_headers(headers, DEFAULT_SECRET_HEADERS, where, [], SecretSet())
    return [[clip(name, 200), clip(value, 2000)] for name, value in shown]


def _body(record: records.Exchange) -> dict[str, Any] | None:
    body = redact_json_fields(record.request.body, DEFAULT_SECRET_FIELDS, frozenset(), [], SecretSet())
    try:
        value = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _tool(spec: Any) -> Tool:
    if not isinstance(spec, dict):
        return Tool(name="?", description="", parameters=pretty(spec))
    nested = spec.get("function")
    fn: dict[str, Any] = nested if isinstance(nested, dict) else spec  # Chat Completions: nested; Responses: flat
    return Tool(
        name=clip(str(fn.get("name") or spec.get("type") or "?"), 200),
        description=clip(str(fn.get("description") or ""), 4000),
        parameters=pretty(fn.get("parameters") if "parameters" in fn else {}),
    )


def request_view(record: records.Exchange) -> RequestView:
    request = record.request
    body = _body(record)
    query = redact_query(request.query, SECRET_QUERY_PARAMS, [], SecretSet())
    tools: list[Any] = []
    response_format = None
    settings: dict[str, Any] = {}
    if body is not None:
        found = body.get("tools") if isinstance(body.get("tools"), list) else body.get("functions")
        tools = found if isinstance(found, list) else []
        fmt = body.get("response_format")
        if fmt is None and isinstance(body.get("text"), dict):
            fmt = body["text"].get("format")  # the Responses API's place for it
        response_format = None if fmt is None else pretty(fmt)
        settings = {k: v for k, v in body.items() if k not in _MESSAGES and k not in _APART}
    return RequestView(
        method=clip(request.method, 20),
        path=clip(request.path + (f"?{query}" if query else ""), 2000),
        body_bytes=len(request.body),
        settings=pretty(settings) if body is not None else NOT_JSON,
        tools=[_tool(t) for t in tools[:MAX_TOOLS]],
        tools_left_out=max(0, len(tools) - MAX_TOOLS),
        response_format=response_format,
        headers=_headers(request.headers, "request"),
        response_headers=_headers(record.response.headers, "response"),
    )
