"""Prompts and answers for `bench export --format otlp --content`: read from the cassettes, redacted as a cassette is
written, in the GenAI conventions' message shape (`gen_ai.input.messages`, `gen_ai.output.messages`,
`gen_ai.system_instructions`: JSON arrays of messages made of typed parts)."""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.core.cassette.redact import Redactor
from bench.core.cassette.seek import SeekIndex
from bench.core.errors import CassetteError
from bench.core.parse import parse_exchange
from bench.core.parsed import ParsedExchange
from bench.core.storage import is_url
from bench.scorer.export import genai
from bench.scorer.results import TrafficLine
from bench.scorer.rules import as_chat


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "".join(str(p.get("text") or "") for p in value if isinstance(p, dict))
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def input_messages(chat: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system instructions, input messages) of a chat request."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for m in chat.get("messages") or () if isinstance(chat, dict) else ():
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "user")
        if role in ("system", "developer"):
            system.append({"type": "text", "content": _text(m.get("content"))})
            continue
        parts: list[dict[str, Any]] = []
        if role == "tool":
            parts.append(
                {"type": "tool_call_response", "id": m.get("tool_call_id"), "response": _text(m.get("content"))}
            )
        elif (text := _text(m.get("content"))) != "":
            parts.append({"type": "text", "content": text})
        for call in m.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.get("id"),
                        "name": fn.get("name"),
                        "arguments": _arguments(fn.get("arguments")),
                    }
                )
        messages.append({"role": role, "parts": parts})
    return system, messages


def tool_definitions(chat: Any) -> list[dict[str, Any]]:
    """The request's function tools as the conventions list them: `{"type": "function", "name", "description",
    "parameters", ...}` (every field of the function kept)."""
    tools = chat.get("tools") if isinstance(chat, dict) else None
    out = []
    for tool in tools if isinstance(tools, list) else ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict):
            out.append({"type": "function", **fn})
    return out


def output_messages(parsed: ParsedExchange) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if parsed.reasoning:
        parts.append({"type": "reasoning", "content": parsed.reasoning})
    if parsed.content or parsed.refusal:
        parts.append({"type": "text", "content": parsed.content or parsed.refusal})
    for call in parsed.tool_calls:
        arguments = call.parsed_arguments if call.valid_json else call.arguments
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments})
    return [{"role": "assistant", "parts": parts, "finish_reason": parsed.finish_reason or ""}]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ContentReader:
    """Each exchange's record read through its cassette's seek index (one frame a record), then redacted."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.seeks: dict[str, SeekIndex] = {}
        self.redactor = Redactor()

    def __enter__(self) -> ContentReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.seeks.clear()

    def attributes(self, line: TrafficLine) -> dict[str, str]:
        seek = self.seeks.get(line.cassette)
        if seek is None:
            where = line.cassette if is_url(line.cassette) else self.base / line.cassette
            seek = self.seeks[line.cassette] = SeekIndex(where)
        try:
            record = seek.read([line.id]).get(line.id)
        except (CassetteError, OSError):
            record = None
        if record is None:
            return {"bench.content": "missing: the cassette no longer holds this exchange"}
        record = self.redactor.redact_exchange(record)
        parsed = parse_exchange(record)
        chat = as_chat(parsed.request_json, parsed.endpoint)
        system, messages = input_messages(chat)
        out = {
            genai.INPUT_MESSAGES: _dumps(messages),
            genai.OUTPUT_MESSAGES: _dumps(output_messages(parsed)),
        }
        if system:
            out[genai.SYSTEM_INSTRUCTIONS] = _dumps(system)
        definitions = tool_definitions(chat)
        if definitions:
            out[genai.TOOL_DEFINITIONS] = _dumps(definitions)
        return out
