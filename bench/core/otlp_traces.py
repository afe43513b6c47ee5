"""OpenTelemetry GenAI traces in OTLP JSON (a collector's file exporter, `bench export --format otlp --out`, an SDK's
JSON file exporter) as imported exchanges (bench.core.imported).

A span is an LLM request when it has `gen_ai.request.model` and its `gen_ai.operation.name` is a model call (`chat`,
`text_completion`, `generate_content`; agent and tool spans are left out). What it asked and got is read from the
conventions' attributes: `gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages` and
`gen_ai.tool.definitions` (JSON arrays of typed parts, v1.37 on), or the indexed attributes OpenLLMetry and LiteLLM
write (`gen_ai.prompt.N.role/content`, `gen_ai.completion.N.content`, `...tool_calls.M.name/arguments`,
`llm.request.functions.N.*`); sampling from `gen_ai.request.*`. A span without any message is left out. Its session
is `gen_ai.conversation.id`, else its trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.imported import ImportedAnswer, ImportedCall, ImportedExchange, chat_body

MODEL_CALLS = frozenset({"chat", "text_completion", "generate_content"})
PARAMS = {
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.stop_sequences": "stop",
    "gen_ai.request.presence_penalty": "presence_penalty",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
}


def _value(v: Any) -> Any:
    """An OTLP JSON AnyValue as a plain value (int64s arrive as strings)."""
    if not isinstance(v, dict):
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        values = v["arrayValue"].get("values") if isinstance(v["arrayValue"], dict) else None
        return [_value(x) for x in values] if isinstance(values, list) else []
    return None


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.get("attributes") or ():
        if isinstance(a, dict) and isinstance(a.get("key"), str):
            out[a["key"]] = _value(a.get("value"))
    return out


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def spans(doc: Any) -> Iterator[dict[str, Any]]:
    for rs in doc.get("resourceSpans") or () if isinstance(doc, dict) else ():
        if not isinstance(rs, dict):
            continue
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            for span in ss.get("spans") or () if isinstance(ss, dict) else ():
                if isinstance(span, dict):
                    yield span


def exchanges(path: Path, values: Iterator[tuple[int, object]]) -> Iterator[ImportedExchange]:
    for number, doc in values:
        if not isinstance(doc, dict) or "resourceSpans" not in doc:
            raise BenchError(f"{path}:{number}: not an OTLP JSON trace (no resourceSpans); one export per line")
        for span in spans(doc):
            found = exchange(span, f"{path.name}:{number}")
            if found is not None:
                yield found


def exchange(span: dict[str, Any], where: str) -> ImportedExchange | None:
    attrs = attributes(span)
    model = attrs.get("gen_ai.request.model")
    operation = attrs.get("gen_ai.operation.name", "chat")
    if not isinstance(model, str) or operation not in MODEL_CALLS:
        return None
    messages = _system(attrs) + (_messages(_json(attrs.get("gen_ai.input.messages"))) or _indexed_prompt(attrs))
    if not messages:
        return None
    params = {key: attrs[name] for name, key in PARAMS.items() if attrs.get(name) is not None}
    started = span.get("startTimeUnixNano")
    trace = span.get("traceId") if isinstance(span.get("traceId"), str) else None
    session = attrs.get("gen_ai.conversation.id") or (f"trace:{trace}" if trace else None)
    return ImportedExchange(
        path="/v1/chat/completions",
        body=chat_body(model, messages, _tools(attrs), params),
        origin=f"{where}/{span.get('spanId', '?')}",
        model=model,
        session=str(session) if session else None,
        answer=_answer(attrs, span),
        started_us=int(started) // 1000 if isinstance(started, str | int) and str(started).isdigit() else None,
    )


def _system(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    parts = _json(attrs.get("gen_ai.system_instructions"))
    if not isinstance(parts, list):
        return []
    text = "".join(str(p.get("content") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
    return [{"role": "system", "content": text}] if text else []


def _messages(value: Any) -> list[dict[str, Any]]:
    """The conventions' messages (role and typed parts) as chat messages."""
    out: list[dict[str, Any]] = []
    for m in value if isinstance(value, list) else ():
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            continue
        parts = [p for p in m.get("parts") or () if isinstance(p, dict)]
        text = "".join(str(p.get("content") or "") for p in parts if p.get("type") == "text")
        calls = [p for p in parts if p.get("type") == "tool_call"]
        results = [p for p in parts if p.get("type") == "tool_call_response"]
        for r in results:
            response = r.get("response")
            content = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
            out.append({"role": "tool", "tool_call_id": str(r.get("id") or ""), "content": content})
        if results and not text and not calls:
            continue
        message: dict[str, Any] = {"role": m["role"], "content": text or (None if calls else "")}
        if calls:
            message["tool_calls"] = [_chat_call(c) for c in calls]
        out.append(message)
    return out


def _chat_call(part: dict[str, Any]) -> dict[str, Any]:
    arguments = part.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
    return {
        "id": str(part.get("id") or ""),
        "type": "function",
        "function": {"name": part.get("name"), "arguments": text},
    }


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`PREFIX.N.FIELD` attributes as a list of {FIELD: value} in N's order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        index, _, field = key[len(prefix) + 1 :].partition(".")
        if index.isdigit() and field:
            found.setdefault(int(index), {})[field] = value
    return [found[i] for i in sorted(found)]


def _indexed_prompt(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for item in _indexed(attrs, "gen_ai.prompt"):
        role = item.get("role")
        if isinstance(role, str):
            out.append({"role": role, "content": str(item.get("content") or "")})
    return out


def _tools(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    definitions = _json(attrs.get("gen_ai.tool.definitions"))
    tools = []
    for d in definitions if isinstance(definitions, list) else ():
        if isinstance(d, dict) and isinstance(d.get("name"), str) and d.get("type", "function") == "function":
            tools.append({"type": "function", "function": {k: v for k, v in d.items() if k != "type"}})
    for item in _indexed(attrs, "llm.request.functions"):
        if isinstance(item.get("name"), str):
            fn = {"name": item["name"], "description": str(item.get("description") or "")}
            parameters = _json(item.get("parameters"))
            if isinstance(parameters, dict):
                fn["parameters"] = parameters
            tools.append({"type": "function", "function": fn})
    return tools


def _answer(attrs: dict[str, Any], span: dict[str, Any]) -> ImportedAnswer | None:
    status: dict[str, Any] = span["status"] if isinstance(span.get("status"), dict) else {}
    ok = status.get("code") not in (2, "STATUS_CODE_ERROR") and "error.type" not in attrs
    reasons = attrs.get("gen_ai.response.finish_reasons")
    finish = reasons[0] if isinstance(reasons, list) and reasons and isinstance(reasons[0], str) else None
    output = _json(attrs.get("gen_ai.output.messages"))
    if isinstance(output, list):
        parts = [p for m in output if isinstance(m, dict) for p in m.get("parts") or () if isinstance(p, dict)]
        text = "".join(str(p.get("content") or "") for p in parts if p.get("type") == "text")
        calls = tuple(
            _call(p.get("name"), p.get("arguments"), p.get("id")) for p in parts if p.get("type") == "tool_call"
        )
        return ImportedAnswer(text, tuple(c for c in calls if c is not None), finish, ok)
    completions = _indexed(attrs, "gen_ai.completion")
    if not completions:
        return None
    first = completions[0]
    calls = tuple(
        _call(
            first.get(f"tool_calls.{i}.name"), first.get(f"tool_calls.{i}.arguments"), first.get(f"tool_calls.{i}.id")
        )
        for i in range(64)
        if f"tool_calls.{i}.name" in first
    )
    return ImportedAnswer(
        str(first.get("content") or ""),
        tuple(c for c in calls if c is not None),
        finish or first.get("finish_reason"),
        ok,
    )


def _call(name: Any, arguments: Any, ident: Any) -> ImportedCall | None:
    if not isinstance(name, str) or not name:
        return None
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
    return ImportedCall(name, text, str(ident) if ident else None)
