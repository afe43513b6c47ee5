"""What identifies the upstream that answered: served model, system_fingerprint, server and tracing headers.

A rescore or a comparison between runs needs to know whether the same backend served both; these fields are what
OpenAI-compatible servers and gateways expose for that.
"""

from __future__ import annotations

from collections.abc import Iterable
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


def identity_headers(headers: Iterable[tuple[str, str]], secret: frozenset[str]) -> dict[str, str]:
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


def body_identity(body: bytes, content_type: str) -> tuple[str | None, str | None]:
    """(model, system_fingerprint) of a non-streamed JSON body; (None, None) if it is not plain JSON."""
    if not body or len(body) > MAX_JSON_IDENTITY or "json" not in content_type:
        return None, None
    try:
        return payload_identity(orjson.loads(body))
    except orjson.JSONDecodeError:
        return None, None  # compressed or not JSON after all
