"""Request fingerprints: what makes two requests "the same" for replay and for pairing runs.

Rule version 1 (documented in docs/cassette-format.md):
  sha256 over  METHOD, a space, the path without a trailing slash, "?" and the query's non-secret parameters
  sorted, a newline, then the canonical body.
  The canonical body of a JSON object is its JSON with sorted keys, compact separators and UTF-8 text, after
  dropping the top-level fields in VOLATILE_FIELDS (they change how an answer is delivered or billed, not what
  the model is asked). Any other body is used as raw bytes.
Changing anything here means bumping FINGERPRINT_VERSION: cassettes store the version they were written with.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import parse_qsl

FINGERPRINT_VERSION = 1

VOLATILE_FIELDS = frozenset({"stream", "stream_options", "user", "metadata", "store"})

# Query parameters that carry credentials on some gateways (Azure's api-key, Google's key).
SECRET_QUERY_PARAMS = frozenset({"api-key", "api_key", "key", "access_token", "token", "code"})

# json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False), with its encoder built once instead of
# per call (the same text: json.dumps builds exactly this encoder when given arguments).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_body(body: bytes) -> Any:
    """The body as the fingerprint sees it: a JSON object without volatile fields, or None if not JSON."""
    if not body:
        return {}
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None  # not JSON, or nested deeper than the parser follows: fingerprinted as raw bytes
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in VOLATILE_FIELDS}
    return value


def canonical_query(query: str) -> list[tuple[str, str]]:
    if not query:
        return []  # most requests: parse_qsl would cost more than the rest of the fingerprint's first line
    pairs = parse_qsl(query, keep_blank_values=True)
    return sorted((k, v) for k, v in pairs if k.lower() not in SECRET_QUERY_PARAMS)


def fingerprint(method: str, path: str, query: str, body: bytes) -> str:
    """The request's fingerprint: 'fp1:' and 32 hex digits (128 bits of sha256)."""
    return fingerprint_of(method, path, query, body, canonical_body(body))


def fingerprint_of(method: str, path: str, query: str, body: bytes, canon: Any) -> str:
    """`fingerprint` given the body's `canonical_body` already: parsing the body and hashing its canonical text are
    two steps of about equal cost, which the proxy's recording task runs with the event loop free in between."""
    digest = hashlib.sha256()
    qs = "&".join(f"{k}={v}" for k, v in canonical_query(query))
    digest.update(f"{method.upper()} {path.rstrip('/') or '/'}?{qs}\n".encode())
    text = None
    if canon is not None:
        try:
            text = _CANONICAL.encode(canon).encode()
        except RecursionError:
            text = None
    if text is None:
        digest.update(b"raw:")
        digest.update(body)
    else:
        digest.update(text)
    return f"fp{FINGERPRINT_VERSION}:{digest.hexdigest()[:32]}"
