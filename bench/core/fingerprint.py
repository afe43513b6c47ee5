"""Request fingerprints: what makes two requests "the same" for replay and for pairing runs.

Rule version 1 (documented in docs/cassette-format.md):
  sha256 over  METHOD, a space, the path without a trailing slash, "?" and the query's non-secret parameters
  sorted, a newline, then the canonical body.
  The canonical body of a JSON object is its JSON with sorted keys, compact separators and UTF-8 text, after
  dropping the top-level fields in VOLATILE_FIELDS (they change how an answer is delivered or billed, not what
  the model is asked). Any other body is used as raw bytes (so is a JSON body whose canonical text has no UTF-8
  form: a string holding a lone surrogate escape such as "\ud800").
Changing anything here means bumping FINGERPRINT_VERSION: cassettes store the version they were written with.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson

FINGERPRINT_VERSION = 1

VOLATILE_FIELDS = frozenset({"stream", "stream_options", "user", "metadata", "store"})

# Query parameters that carry credentials on some gateways (Azure's api-key, Google's key).
SECRET_QUERY_PARAMS = frozenset({"api-key", "api_key", "key", "access_token", "token", "code"})

# json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False), with its encoder built once instead of
# per call (the same text: json.dumps builds exactly this encoder when given arguments).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

# The canonical text is json's (above); orjson reads and writes the same documents ~10x faster and gives the same bytes
# except where the two libraries differ (docs/proxy.md, "Measured facts the code relies on"; compared over arbitrary
# JSON by tests/bench/core/test_fingerprint.py). orjson refuses what it reads differently (NaN, Infinity, a number too
# large for a double, a lone surrogate, a byte order mark, nesting past 1024) and what it cannot write (nesting past
# 254; json's path reads and writes that deep with the stack a handler has): json's path then decides. Where its text
# could differ, the text shows it: integers past 64 bits become floats written with an exponent, and both write a float
# as its shortest round-trip digits, but json switches to an exponent below 1e-4 and from 1e16 on, orjson at other
# bounds. A text with a digit before an `e`, `.0000` or 17 digits in a row (or a string that happens to hold one) is
# redone by json's path, which costs only the time saved. (A regular expression for this cost more than orjson's reading
# and writing together: digits are mapped to 0 and E to e, and three plain searches do it.)
_DIGITS_TO_0 = bytes.maketrans(b"123456789E", b"000000000e")


class Undecided:
    """`canonical_text_fast`'s answer where only json's path can decide."""


UNDECIDED: Final = Undecided()


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


def canonical_text_fast(body: bytes) -> bytes | Undecided:
    """The canonical body's text, read and written by orjson, or UNDECIDED where that could differ from json's (a
    body orjson cannot read included: json may read it, or hash it raw)."""
    if not body:
        return b"{}"
    try:
        value = orjson.loads(body)
        if isinstance(value, dict):
            for name in VOLATILE_FIELDS.intersection(value):
                del value[name]
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return UNDECIDED
    digits = text.translate(_DIGITS_TO_0)
    if b"0e" in digits or b"00000000000000000" in digits or b".0000" in text:
        return UNDECIDED
    return text


def text_of(canon: Any) -> bytes | None:
    """The canonical text of a `canonical_body` (json's path); None: hash the raw bytes."""
    if canon is None:
        return None
    try:
        return _CANONICAL.encode(canon).encode()
    except (RecursionError, UnicodeEncodeError):
        # Too deep to write back, or a string holding a lone surrogate (`"\ud800"`: valid JSON, but no UTF-8 text
        # exists for it): hashed as the raw body, never an error that would lose the request's record.
        return None


def canonical_text(body: bytes) -> bytes | None:
    """What the fingerprint hashes after its first line: the canonical body's text, or None for the raw bytes."""
    text = canonical_text_fast(body)
    return text_of(canonical_body(body)) if isinstance(text, Undecided) else text


def canonical_query(query: str) -> list[tuple[str, str]]:
    if not query:
        return []  # most requests: parse_qsl would cost more than the rest of the fingerprint's first line
    pairs = parse_qsl(query, keep_blank_values=True)
    return sorted((k, v) for k, v in pairs if k.lower() not in SECRET_QUERY_PARAMS)


def fingerprint(method: str, path: str, query: str, body: bytes) -> str:
    """The request's fingerprint: 'fp1:' and 32 hex digits (128 bits of sha256)."""
    return fingerprint_with(method, path, query, body, canonical_text(body))


def fingerprint_of(method: str, path: str, query: str, body: bytes, canon: Any) -> str:
    """`fingerprint` given the body's `canonical_body` already (json's path, in two steps: the proxy's recording
    task runs them with the event loop free in between)."""
    return fingerprint_with(method, path, query, body, text_of(canon))


def fingerprint_with(method: str, path: str, query: str, body: bytes, text: bytes | None) -> str:
    """`fingerprint` given the body's `canonical_text` already."""
    digest = hashlib.sha256()
    qs = "&".join(f"{k}={v}" for k, v in canonical_query(query))
    digest.update(f"{method.upper()} {path.rstrip('/') or '/'}?{qs}\n".encode())
    if text is None:
        digest.update(b"raw:")
        digest.update(body)
    else:
        digest.update(text)
    return f"fp{FINGERPRINT_VERSION}:{digest.hexdigest()[:32]}"
