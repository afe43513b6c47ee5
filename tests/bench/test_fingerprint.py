from __future__ import annotations

import json

from bench.fingerprint import fingerprint


def body(**kw: object) -> bytes:
    return json.dumps(kw).encode()


def test_volatile_fields_and_key_order_do_not_matter() -> None:
    a = fingerprint("POST", "/v1/chat/completions", "", body(model="m", messages=[], stream=True, user="u"))
    b = fingerprint("post", "/v1/chat/completions/", "", b'{"messages": [], "model": "m"}')
    assert a == b
    assert a.startswith("fp1:") and len(a) == 36


def test_what_the_model_is_asked_matters() -> None:
    base = fingerprint("POST", "/v1/chat/completions", "", body(model="m", temperature=0))
    assert base != fingerprint("POST", "/v1/chat/completions", "", body(model="m", temperature=1))
    assert base != fingerprint("POST", "/v1/completions", "", body(model="m", temperature=0))
    assert base != fingerprint("GET", "/v1/chat/completions", "", body(model="m", temperature=0))


def test_secret_query_params_are_ignored_and_raw_bodies_hashed() -> None:
    assert fingerprint("GET", "/v1/models", "api-key=abc&b=1", b"") == fingerprint("GET", "/v1/models", "b=1", b"")
    assert fingerprint("POST", "/x", "", b"\x00raw") != fingerprint("POST", "/x", "", b"\x00raw2")
