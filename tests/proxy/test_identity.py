"""The served identity of a non-streamed body, in bounded memory however large the body."""

from __future__ import annotations

import orjson

from bench.proxy.identity import MAX_JSON_IDENTITY, reads_identity


def body(content: bytes) -> bytes:
    head = b'{"id":"c1","object":"chat.completion","model":"m-\\"served\\"","choices":[{"message":{"content":"'
    return head + content + b'"}}],"system_fingerprint":"fp_9"}'


def reads(data: bytes, size: int = 65536) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_a_small_body_is_parsed_whole() -> None:
    data = body(b"hello")
    assert orjson.loads(data)["model"] == 'm-"served"'
    assert reads_identity(reads(data, 7), "application/json") == ('m-"served"', "fp_9")
    assert reads_identity(reads(data, 7), "text/plain") == (None, None)


def test_a_body_past_the_parsing_limit_is_identified_from_its_edges() -> None:
    data = body(b"word " * (MAX_JSON_IDENTITY // 5 + 1000))
    assert len(data) > MAX_JSON_IDENTITY
    assert reads_identity(reads(data), "application/json") == ('m-"served"', "fp_9")
    # The edges are found across read boundaries too.
    assert reads_identity(reads(data, 3), "application/json") == ('m-"served"', "fp_9")
    assert reads_identity(reads(data), "text/plain") == (None, None)
