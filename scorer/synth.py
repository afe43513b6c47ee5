"""Synthetic exchange records in the cassette format (docs/cassette-format.md): what a well-behaved OpenAI-style
server would have streamed for a given answer and tool calls. Used by bench.scorer.reference and by tests/benchmarks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from bench.core.cassette.records import Exchange, Request, Response, Timing, Upstream

EVENT_US = 1000


def _sse(obj: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(model: str, delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-synth",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "system_fingerprint": "fp_synth",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


def text_pieces(text: str, size: int = 4) -> list[str]:
    """Token-sized pieces (about four characters each, as BPE tokens of English are)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse_chunks(
    content: str = "",
    calls: Sequence[tuple[str, Mapping[str, Any] | str]] = (),
    *,
    model: str = "synth",
    piece: int = 4,
) -> list[bytes]:
    """An SSE stream: role, content pieces, tool calls (id+name, then arguments in two halves), finish, usage, DONE."""
    chunks = [_sse(_chunk(model, {"role": "assistant", "content": ""}))]
    tokens = 0
    for part in text_pieces(content, piece):
        chunks.append(_sse(_chunk(model, {"content": part})))
        tokens += 1
    for i, (name, arguments) in enumerate(calls):
        args = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        head = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}
        chunks.append(_sse(_chunk(model, {"tool_calls": [head]})))
        half = len(args) // 2
        for frag in (args[:half], args[half:]):
            chunks.append(_sse(_chunk(model, {"tool_calls": [{"index": i, "function": {"arguments": frag}}]})))
            tokens += 1
    chunks.append(_sse(_chunk(model, {}, "tool_calls" if calls else "stop")))
    usage = {"prompt_tokens": 10, "completion_tokens": max(tokens, 1), "total_tokens": 10 + max(tokens, 1)}
    chunks.append(
        _sse({"id": "chatcmpl-synth", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage})
    )
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def exchange_record(
    chunks: Sequence[bytes],
    *,
    id: str = "x0",
    tags: Mapping[str, str] | None = None,
    request: Mapping[str, Any] | None = None,
    status: int | None = 200,
    outcome: str = "complete",
    streamed: bool = True,
    event_us: int = EVENT_US,
) -> Exchange:
    body = orjson.dumps(request or {"model": (tags or {}).get("model", "synth"), "stream": streamed})
    n = len(chunks)
    return Exchange(
        id=id,
        started=0,
        mode="record",
        request=Request(
            method="POST",
            path="/v1/chat/completions",
            query="",
            headers=[["Content-Type", "application/json"]],
            body=body,
            fp="fp1:" + "0" * 32,
        ),
        response=Response(
            status=status,
            headers=[["Content-Type", "text/event-stream" if streamed else "application/json"]],
            chunks=list(chunks),
            chunk_us=[event_us] * n,
            streamed=streamed,
            raw_bytes=sum(len(c) for c in chunks),
        ),
        timing=Timing(
            sent_upstream=10,
            headers=event_us // 2,
            first_byte=event_us,
            first_token=2 * event_us if n > 1 else None,
            end=event_us * n + 10,
            proxy_us=5,
        ),
        upstream=Upstream(url="http://synth", system_fingerprint="fp_synth", model="synth"),
        outcome=outcome,
        tags=dict(tags or {}),
    )
