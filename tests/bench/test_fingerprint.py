"""Request fingerprints (rule version 1, docs/cassette-format.md): what makes two requests the same for replay.

Digests are a contract: cassettes store them, replay matches on them. The known answers below were computed once
from the documented rule; any change to them needs a FINGERPRINT_VERSION bump (and a new set of answers).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from bench.fingerprint import FINGERPRINT_VERSION, SECRET_QUERY_PARAMS, VOLATILE_FIELDS, fingerprint, fingerprint_of

CHAT = "/v1/chat/completions"
HI = b'{"model":"m","messages":[{"role":"user","content":"Hi"}]}'
CAFE = b'{"model":"m","messages":[{"role":"user","content":"caf\\u00e9"}]}'


def body(**kw: object) -> bytes:
    return json.dumps(kw).encode()


def documented(head: str, canonical: bytes) -> str:
    """The rule written out from the documentation, independently of the code."""
    return "fp1:" + hashlib.sha256(head.encode() + canonical).hexdigest()[:32]


@pytest.mark.parametrize(
    ("method", "path", "query", "raw", "digest"),
    [
        ("POST", CHAT, "", HI, "52d94d591b15317e3b1f56b73ad0f4ec"),
        ("GET", "/v1/models", "b=2&a=1&a=0&Key=s&empty=", b"", "d93a84a1de46b70b0c6071f52e4127e1"),
        ("POST", "/x", "", b"\x00raw", "a48c2e7138a8b96ec319d5ea7c2293f5"),
        ("POST", "/v1/embeddings", "", b"[1,2]", "83fe4a37d45c7fb77bc8ea3613c765d7"),
        ("POST", CHAT, "", CAFE, "3258e178d02b152e2edc2eff4db3a8b1"),
    ],
)  # fmt: skip
def test_known_answers_of_rule_version_1(method: str, path: str, query: str, raw: bytes, digest: str) -> None:
    assert FINGERPRINT_VERSION == 1, "a new rule version needs its own known answers"
    assert fingerprint(method, path, query, raw) == f"fp1:{digest}"


def test_the_known_answers_follow_the_documented_rule() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "café"}], "stream": True, "user": "u"}
    canonical = '{"messages":[{"content":"café","role":"user"}],"model":"m"}'.encode()
    assert fingerprint("post", CHAT + "/", "", json.dumps(chat).encode()) == documented(f"POST {CHAT}?\n", canonical)
    assert fingerprint("GET", "/v1/models", "b=2&a=1&a=0&Key=s&empty=", b"") == documented(
        "GET /v1/models?a=0&a=1&b=2&empty=\n", b"{}"
    )
    assert fingerprint("POST", "/x", "", b"\x00raw") == documented("POST /x?\n", b"raw:\x00raw")
    assert fingerprint("POST", "/", "", b"[1,2]") == documented("POST /?\n", b"[1,2]")


def test_volatile_fields_and_key_order_do_not_matter() -> None:
    a = fingerprint("POST", CHAT, "", body(model="m", messages=[], stream=True, user="u"))
    b = fingerprint("post", CHAT + "/", "", b'{"messages": [], "model": "m"}')
    assert a == b
    assert a.startswith("fp1:") and len(a) == 36


@pytest.mark.parametrize("field", sorted(VOLATILE_FIELDS))
def test_each_volatile_field_is_ignored(field: str) -> None:
    assert {"stream", "stream_options", "user", "metadata", "store"} == VOLATILE_FIELDS
    plain = fingerprint("POST", CHAT, "", body(model="m"))
    assert fingerprint("POST", CHAT, "", body(model="m", **{field: {"x": 1}})) == plain
    # Only at the top level: the same name inside a message is part of the question.
    nested = body(model="m", messages=[{"role": "user", field: "x"}])
    assert fingerprint("POST", CHAT, "", nested) != fingerprint(
        "POST", CHAT, "", body(model="m", messages=[{"role": "user"}])
    )


def test_what_the_model_is_asked_matters() -> None:
    base = fingerprint("POST", CHAT, "", body(model="m", temperature=0))
    assert base != fingerprint("POST", CHAT, "", body(model="m", temperature=1))
    assert base != fingerprint("POST", CHAT, "", body(model="m", temperature=0, seed=1))
    assert base != fingerprint("POST", "/v1/completions", "", body(model="m", temperature=0))
    assert base != fingerprint("GET", CHAT, "", body(model="m", temperature=0))
    assert base != fingerprint("POST", CHAT, "a=1", body(model="m", temperature=0))


@pytest.mark.parametrize("name", sorted(SECRET_QUERY_PARAMS))
def test_secret_query_params_are_ignored_in_any_case(name: str) -> None:
    plain = fingerprint("GET", "/v1/models", "b=1", b"")
    assert fingerprint("GET", "/v1/models", f"{name}=abc&b=1", b"") == plain
    assert fingerprint("GET", "/v1/models", f"{name.upper()}=abc&b=1", b"") == plain


def test_query_order_encoding_and_blank_values() -> None:
    sorted_q = fingerprint("GET", "/v1/models", "a=1&b=2", b"")
    assert fingerprint("GET", "/v1/models", "b=2&a=1", b"") == sorted_q
    assert fingerprint("GET", "/v1/models", "a=%31&b=2", b"") == sorted_q  # percent-decoded before comparing
    assert fingerprint("GET", "/v1/models", "a=1&b=2&c=", b"") != sorted_q  # blank values count
    assert fingerprint("GET", "/v1/models", "a=1&a=2", b"") != fingerprint("GET", "/v1/models", "a=2", b"")


def test_raw_and_odd_bodies() -> None:
    assert fingerprint("POST", "/x", "", b"\x00raw") != fingerprint("POST", "/x", "", b"\x00raw2")
    assert fingerprint("POST", "/x", "", b"") == fingerprint("POST", "/x", "", b"{}")  # no body: an empty object
    # Bytes that are not JSON are hashed as they are, marked so that they never equal a JSON body.
    assert fingerprint("POST", "/x", "", b"{bad") != fingerprint("POST", "/x", "", b"{}")
    assert fingerprint("POST", "/x", "", b"\xff\xfe") != fingerprint("POST", "/x", "", b"\xff")
    assert fingerprint("POST", "/x", "", b" [1, 2] ") == fingerprint("POST", "/x", "", b"[1,2]")


def test_a_parsed_body_too_deep_to_serialise_is_fingerprinted_as_its_raw_bytes() -> None:
    # The proxy parses the body in one step and hashes it in the next (fingerprint_of); a value nested past what
    # json can write back is hashed as the raw body, as a body json cannot read is, never an error.
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    raw = b"[" * 100_000 + b"]" * 100_000
    assert fingerprint_of("POST", "/x", "", raw, deep) == documented("POST /x?\n", b"raw:" + raw)


def test_only_trailing_slashes_are_dropped_from_the_path() -> None:
    assert fingerprint("GET", "/v1/modelsX", "", b"") != fingerprint("GET", "/v1/models", "", b"")
    assert fingerprint("GET", "/v1/models//", "", b"") == fingerprint("GET", "/v1/models", "", b"")
    assert fingerprint("GET", "/", "", b"") == fingerprint("GET", "", "", b"")
