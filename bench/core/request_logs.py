"""OpenAI-format request logs (JSON Lines) as imported exchanges (bench.core.imported). Each line is one of:

- an OpenAI Batch API input line: `{"custom_id", "method", "url": "/v1/chat/completions", "body": {...}}`;
- a logged pair: `{"request": {...}, "response": {...}}`, as gateways log them (the response a Chat Completions or a
  Responses API object);
- a request body alone: `messages` (Chat Completions), `input` (Responses API) or `prompt` (Completions), with an
  optional `response` beside it.

A line's time, when it has one, is `timestamp`, `start_time`, `startTime`, `created_at` or `created` (Unix seconds or
milliseconds, or ISO 8601); its session `session_id`, `conversation_id`, `trace_id` or `metadata.session_id`. A line
that is none of these is a one-line error naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from bench.core.errors import BenchError
from bench.core.imported import ImportedAnswer, ImportedCall, ImportedExchange

TIME_KEYS = ("timestamp", "start_time", "startTime", "created_at", "created")
SESSION_KEYS = ("session_id", "conversation_id", "trace_id")
LOG_KEYS = frozenset({"response", *TIME_KEYS, *SESSION_KEYS})
PATHS = {"messages": "/v1/chat/completions", "input": "/v1/responses", "prompt": "/v1/completions"}


def exchanges(path: Path, values: Iterator[tuple[int, object]]) -> Iterator[ImportedExchange]:
    for number, doc in values:
        where = f"{path}:{number}"
        if not isinstance(doc, dict):
            raise BenchError(f"{where}: not a JSON object; each line is a request (a body, a Batch API line or a pair)")
        yield _exchange(doc, where, f"{path.name}:{number}")


def _exchange(doc: dict[str, Any], where: str, origin: str) -> ImportedExchange:
    response: Any = doc.get("response")
    if isinstance(doc.get("body"), dict) and isinstance(doc.get("url"), str):  # a Batch API input line
        body, path, method = doc["body"], doc["url"], str(doc.get("method") or "POST")
    elif isinstance(doc.get("request"), dict):
        body, path, method = doc["request"], None, "POST"
    else:
        body, path, method = doc, None, "POST"
    if path is None:
        path = next((p for key, p in PATHS.items() if key in body), None)
    if path is None or not path.startswith("/"):
        raise BenchError(
            f"{where}: no request in it (messages, input or prompt; or a Batch API line with url and body)"
        )
    if isinstance(response, dict) and isinstance(response.get("body"), dict):  # a Batch API output line's shape
        response = response["body"]
    # A body alone carries the log's own fields beside the request's: they are not sent.
    request = {k: v for k, v in body.items() if k not in LOG_KEYS} if body is doc else body
    model = request.get("model")
    return ImportedExchange(
        path=path,
        body=orjson.dumps(request),
        method=method,
        origin=origin,
        model=model if isinstance(model, str) else None,
        session=_session(doc),
        answer=answer_of(response) if isinstance(response, dict) else None,
        started_us=_time(doc),
    )


def _session(doc: dict[str, Any]) -> str | None:
    for key in SESSION_KEYS:
        if isinstance(doc.get(key), str | int):
            return str(doc[key])
    metadata = doc.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("session_id"), str):
        return str(metadata["session_id"])
    return None


def _time(doc: dict[str, Any]) -> int | None:
    for key in TIME_KEYS:
        value = doc.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            seconds = value / 1000 if value > 1e11 else value  # milliseconds past the year 5138 in seconds
            return int(seconds * 1_000_000)
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            return int(moment.timestamp() * 1_000_000)
    return None


def answer_of(response: dict[str, Any]) -> ImportedAnswer:
    """A Chat Completions or Responses API response object's answer."""
    ok = "error" not in response or not response.get("error")
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
        calls = []
        for call in message.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                calls.append(ImportedCall(fn["name"], _text(fn.get("arguments")), _str(call.get("id"))))
        text = message.get("content") if isinstance(message.get("content"), str) else str(choice.get("text") or "")
        return ImportedAnswer(text or "", tuple(calls), _str(choice.get("finish_reason")), ok)
    texts, calls = [], []
    for item in response.get("output") or ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call" and isinstance(item.get("name"), str):
            calls.append(ImportedCall(item["name"], _text(item.get("arguments")), _str(item.get("call_id"))))
        for part in item.get("content") or () if item.get("type") == "message" else ():
            if isinstance(part, dict) and part.get("type") == "output_text":
                texts.append(str(part.get("text") or ""))
    finish = "tool_calls" if calls else ("stop" if response.get("status") == "completed" else response.get("status"))
    return ImportedAnswer("".join(texts), tuple(calls), finish if isinstance(finish, str) else None, ok)


def _text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
