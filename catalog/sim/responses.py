"""Encode a Reply as the Responses API sends it: typed SSE events (`event:` line and JSON `data:` with the same
`type` and a `sequence_number`) or one response object.

A stream is `response.created` and `response.in_progress`, then per output item its `output_item.added`, deltas
(`output_text.delta` per token, `function_call_arguments.delta` per fragment), `.done` events and
`output_item.done`, then `response.completed` (or `response.incomplete` when cut at max_output_tokens) carrying the
whole response with its usage. Frames group the bookkeeping events with the delta that follows them, so each write
the pacing makes is one token, as on the chat endpoint.
"""

from __future__ import annotations

from typing import Any

import orjson

from bench.catalog.sim.reply import Reply
from bench.catalog.sim.stream import ARG_FRAGMENT, Encoded, Meta, split_tokens


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _items(reply: Reply, meta: Meta) -> list[dict[str, Any]]:
    tag = meta.id[-8:]
    items: list[dict[str, Any]] = []
    if reply.content:
        items.append(
            {
                "type": "message",
                "id": f"msg_{tag}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
            }
        )
    for i, call in enumerate(reply.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{tag}_{i}",
                "call_id": f"call_{tag}_{i}",
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
        )
    return items


def response_object(
    reply: Reply, meta: Meta, input_tokens: int, output_tokens: int, status: str | None = None
) -> dict[str, Any]:
    cut = reply.finish == "length"
    final = status or ("incomplete" if cut else "completed")
    return {
        "id": f"resp_{meta.id[-8:]}",
        "object": "response",
        "created_at": meta.created,
        "status": final,
        "model": meta.model,
        "output": _items(reply, meta) if final != "in_progress" else [],
        "usage": _usage(input_tokens, output_tokens) if final != "in_progress" else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if final == "incomplete" else None,
    }


class _Events:
    def __init__(self) -> None:
        self.seq = 0
        self.pending: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        data = orjson.dumps({"type": kind, "sequence_number": self.seq, **fields})
        self.seq += 1
        self.pending.append(b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n")

    def take(self) -> bytes:
        out, self.pending = b"".join(self.pending), []
        return out


def encode_response_stream(reply: Reply, meta: Meta, input_tokens: int, output_tokens: int) -> Encoded:
    ev = _Events()
    started = response_object(reply, meta, input_tokens, output_tokens, status="in_progress")
    ev.add("response.created", response=started)
    ev.add("response.in_progress", response=started)
    frames = [ev.take()]
    items = _items(reply, meta)
    for index, item in enumerate(items):
        if item["type"] == "message":
            ev.add(
                "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []}
            )
            ev.add(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": []},
            )
            for piece in split_tokens(reply.content):
                ev.add(
                    "response.output_text.delta", item_id=item["id"], output_index=index, content_index=0, delta=piece
                )
                frames.append(ev.take())
            ev.add(
                "response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=reply.content
            )
            ev.add(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        else:
            ev.add(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            args = item["arguments"]
            for start in range(0, len(args), ARG_FRAGMENT):
                ev.add(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=args[start : start + ARG_FRAGMENT],
                )
                frames.append(ev.take())
            ev.add("response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments=args)
        ev.add("response.output_item.done", output_index=index, item=item)
    final = response_object(reply, meta, input_tokens, output_tokens)
    ev.add(f"response.{final['status']}", response=final)
    usage: dict[str, int] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    return Encoded(frames, [ev.take()], usage, reply.finish)


def encode_response_body(reply: Reply, meta: Meta, input_tokens: int, output_tokens: int) -> bytes:
    return orjson.dumps(response_object(reply, meta, input_tokens, output_tokens))
