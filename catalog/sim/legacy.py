"""Encode answers for the two older endpoints: legacy Completions (`text_completion` chunks or body, one `text`
per token) and Embeddings (a deterministic vector per input, derived from its text, so recordings repeat)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from bench.catalog.sim.reply import Reply
from bench.catalog.sim.stream import Encoded, Meta, split_tokens

EMBEDDING_DIMENSIONS = 8


def _chunk(meta: Meta, text: str, finish: str | None) -> bytes:
    obj = {
        "id": meta.id,
        "object": "text_completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def encode_completion_stream(
    reply: Reply, meta: Meta, prompt_tokens: int, completion_tokens: int, include_usage: bool
) -> Encoded:
    frames = [_chunk(meta, piece, None) for piece in split_tokens(reply.content)]
    frames.append(_chunk(meta, "", reply.finish))
    usage = _usage(prompt_tokens, completion_tokens)
    tail: list[bytes] = []
    if include_usage:
        obj = {
            "id": meta.id,
            "object": "text_completion",
            "created": meta.created,
            "model": meta.model,
            "choices": [],
            "usage": usage,
        }
        tail.append(b"data: " + orjson.dumps(obj) + b"\n\n")
    tail.append(b"data: [DONE]\n\n")
    return Encoded(frames, tail, usage, reply.finish)


def encode_completion_body(reply: Reply, meta: Meta, prompt_tokens: int, completion_tokens: int) -> bytes:
    return orjson.dumps(
        {
            "id": meta.id,
            "object": "text_completion",
            "created": meta.created,
            "model": meta.model,
            "choices": [{"text": reply.content, "index": 0, "logprobs": None, "finish_reason": reply.finish}],
            "usage": _usage(prompt_tokens, completion_tokens),
        }
    )


def embedding_inputs(body: Mapping[str, Any]) -> list[str] | None:
    """The texts to embed (a string, a list of strings, or token lists read as their numbers); None if malformed."""
    raw = body.get("input")
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw:
        if all(isinstance(x, str) for x in raw):
            return list(raw)
        if all(isinstance(x, int) for x in raw):
            return [" ".join(map(str, raw))]
        if all(isinstance(x, list) for x in raw):
            return [" ".join(map(str, x)) for x in raw]
    return None


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [round((b - 127.5) / 127.5, 6) for b in digest[:EMBEDDING_DIMENSIONS]]


def encode_embeddings(texts: list[str], model: str) -> bytes:
    tokens = sum(max(1, len(split_tokens(t))) for t in texts)
    return orjson.dumps(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(texts)],
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )
