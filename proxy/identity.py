"""What identifies the upstream that answered: served model, system_fingerprint, server and tracing headers.

A rescore or a comparison between runs needs to know whether the same backend served both; these fields are what
OpenAI-compatible servers and gateways expose for that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

IDENTITY_HEADERS = frozenset(
    {
        "x-request-id",
        "request-id",
        "via",
        "cf-ray",
        "x-amzn-requestid",
        "x-envoy-upstream-service-time",
        "apim-request-id",
        "azureml-model-deployment",
        "x-served-by",
        "x-model",
        "x-backend",
    }
)
IDENTITY_PREFIXES = ("openai-", "x-ratelimit-", "x-litellm-", "anthropic-", "x-vllm-", "x-groq-", "x-ms-")

# Parsing a large body only to read two top-level fields is not worth it past this size.
MAX_JSON_IDENTITY = 8 << 20
# Past it, the body's first and last this many bytes are searched for them instead.
EDGE_BYTES = 64 << 10
_EDGE_MODEL = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.){1,256})"')
_EDGE_FP = re.compile(rb'"system_fingerprint"\s*:\s*"((?:[^"\\]|\\.){1,256})"')


def identity_headers(headers: Iterable[Sequence[str]], secret: frozenset[str]) -> dict[str, str]:
    """Identifying response headers, lower-cased; names the redactor treats as secret are left out entirely."""
    out: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in secret:
            continue
        if low in IDENTITY_HEADERS or low.startswith(IDENTITY_PREFIXES):
            out[low] = value
    return out


def payload_identity(obj: Any) -> tuple[str | None, str | None]:
    """(model, system_fingerprint) of one parsed JSON payload (a chat chunk, a body, a Responses API event)."""
    if not isinstance(obj, dict):
        return None, None
    inner = obj.get("response")
    if isinstance(inner, dict) and "model" not in obj:
        obj = inner
    model = obj.get("model")
    fp = obj.get("system_fingerprint")
    return (model if isinstance(model, str) else None), (fp if isinstance(fp, str) else None)


def reads_identity(reads: Sequence[bytes], content_type: str) -> tuple[str | None, str | None]:
    """`body_identity` of a body given as its reads, in bounded memory: a body up to MAX_JSON_IDENTITY is joined and
    parsed; a larger one is not copied, only its first and last EDGE_BYTES are searched for the two fields (OpenAI and
    compatible servers write `model` near the start of a body and `system_fingerprint` near its end)."""
    size = sum(map(len, reads))
    if size <= MAX_JSON_IDENTITY:
        return body_identity(b"".join(reads), content_type)
    if "json" not in content_type:
        return None, None
    return edges_identity(edge(reads, EDGE_BYTES), edge(reads[::-1], EDGE_BYTES, tail=True))


def edges_identity(head: bytes, tail: bytes) -> tuple[str | None, str | None]:
    """(model, system_fingerprint) of a large JSON body from its first and last EDGE_BYTES."""
    model = _EDGE_MODEL.search(head)
    fp = _EDGE_FP.search(tail) or _EDGE_FP.search(head)
    return _json_str(model), _json_str(fp)


def _json_str(match: re.Match[bytes] | None) -> str | None:
    if match is None:
        return None
    try:
        value = orjson.loads(b'"' + match.group(1) + b'"')
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def edge(reads: Sequence[bytes], n: int, tail: bool = False) -> bytes:
    """The first (or, with `tail`, the last: `reads` given reversed) n bytes of the reads, joined."""
    parts: list[bytes] = []
    have = 0
    for read in reads:
        parts.append(read[-(n - have) :] if tail else read[: n - have])
        have += len(parts[-1])
        if have >= n:
            break
    return b"".join(parts[::-1] if tail else parts)


def body_identity(body: bytes, content_type: str) -> tuple[str | None, str | None]:
    """(model, system_fingerprint) of a non-streamed JSON body; (None, None) if it is not plain JSON."""
    if not body or len(body) > MAX_JSON_IDENTITY or "json" not in content_type:
        return None, None
    try:
        return payload_identity(orjson.loads(body))
    except orjson.JSONDecodeError:
        return None, None  # compressed or not JSON after all
