"""Encode a Reply the way OpenAI-compatible servers send it: SSE chunks (role frame, one delta per token, tool-call
fragments by index, finish_reason, optional usage chunk, [DONE]) or one chat.completion JSON body."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from bench.catalog.sim.reply import Reply

SYSTEM_FINGERPRINT = "fp_bench_sim_1"
# Tool-call arguments are streamed in pieces of this many characters, as vLLM and OpenAI do (a few tokens each).
ARG_FRAGMENT = 8

_TOKEN = re.compile(r"\s*\S+|\s+")


def split_tokens(text: str) -> list[str]:
    """Word-sized pieces that join back to `text`; the sim's notion of a token."""
    return _TOKEN.findall(text)


def count_prompt_tokens(body: Mapping[str, Any]) -> int:
    # About four bytes a token, as tokenizers average on English and JSON.
    return max(1, len(orjson.dumps(body.get("messages") or [])) // 4)


@dataclass(frozen=True)
class Meta:
    id: str
    created: int
    model: str


@dataclass
class Encoded:
    """The frames of one streamed answer: `frames[0]` is the role frame; `tail` holds usage and [DONE]."""

    frames: list[bytes]
    tail: list[bytes]
    usage: dict[str, int]
    finish_reason: str


def limit_reply(reply: Reply, max_tokens: int | None) -> tuple[Reply, int]:
    """Cut the content to the request's max_tokens, as a server stops generating; returns the output token count."""
    pieces = split_tokens(reply.content)
    calls_tokens = sum(1 + -(-len(c.arguments) // ARG_FRAGMENT) for c in reply.tool_calls)
    if max_tokens is not None and len(pieces) > max_tokens:
        return Reply(content="".join(pieces[:max_tokens]), finish_reason="length"), max_tokens
    return reply, len(pieces) + calls_tokens


FILLER = split_tokens(" and so the answer goes on")


def forced_length(body: Mapping[str, Any]) -> int | None:
    """The output length a request forces (vLLM's `ignore_eos` with `max_tokens`, or `min_tokens`), if any."""
    wanted = body.get("min_tokens")
    if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted > 0:
        return min(wanted, 1 << 16)
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if body.get("ignore_eos") is True and isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return min(limit, 1 << 16)
    return None


def pad_reply(reply: Reply, tokens: int) -> Reply:
    """A text reply made `tokens` tokens long, as a server that ignores its end-of-sequence token goes on."""
    if reply.tool_calls:
        return reply
    pieces = split_tokens(reply.content)
    while len(pieces) < tokens:
        pieces.append(FILLER[len(pieces) % len(FILLER)])
    return Reply(content="".join(pieces[:tokens]), finish_reason=reply.finish_reason)


def _event(meta: Meta, **fields: Any) -> bytes:
    """One SSE event holding a chat.completion.chunk with the envelope every chunk of a stream shares."""
    obj = {
        "id": meta.id,
        "object": "chat.completion.chunk",
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        **fields,
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(meta: Meta, delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _event(meta, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])


def encode_stream(reply: Reply, meta: Meta, prompt_tokens: int, completion_tokens: int, include_usage: bool) -> Encoded:
    frames = [_chunk(meta, {"role": "assistant", "content": ""})]
    frames.extend(_chunk(meta, {"content": piece}) for piece in split_tokens(reply.content))
    for index, call in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": f"call_{meta.id[-8:]}_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        frames.append(_chunk(meta, {"tool_calls": [head]}))
        for start in range(0, len(call.arguments), ARG_FRAGMENT):
            piece = call.arguments[start : start + ARG_FRAGMENT]
            frames.append(_chunk(meta, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    frames.append(_chunk(meta, {}, reply.finish))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    tail: list[bytes] = []
    if include_usage:
        tail.append(_event(meta, choices=[], usage=usage))
    tail.append(b"data: [DONE]\n\n")
    return Encoded(frames, tail, usage, reply.finish)


def encode_body(reply: Reply, meta: Meta, prompt_tokens: int, completion_tokens: int) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{meta.id[-8:]}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
    obj = {
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return orjson.dumps(obj)


def error_body(status: int, message: str) -> bytes:
    kinds = {429: ("rate_limit_error", "rate_limit_exceeded"), 408: ("timeout", "request_timeout")}
    kind, code = kinds.get(status, ("server_error", "internal_error"))
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})
