"""Redaction over the parts of a record: every way a secret reaches a record, and every form it is echoed in."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.cassette import redact
from bench.core.cassette.records import Exchange, Upstream
from bench.core.cassette.redact import (
    MIN_SCRUB_LEN,
    REDACTED,
    BodyScrubber,
    Redactor,
    SecretSet,
    describe_bad_request,
    scrub_reads,
    secret_forms,
)
from bench.core.decoding import decode_reads, encode_reads
from tests.support.records import as_map, exchange

KEY = "sk-live-0123456789abcdef"


@pytest.fixture(autouse=True)
def _forms_worked_out_afresh() -> Iterator[None]:
    # The forms of a secret are cached per process; without clearing them, a test would be handed the forms an
    # earlier test worked out, and a fault in working them out would be seen by the first test only.
    redact.secret_forms.cache_clear()
    redact._forms_of.cache_clear()
    yield


def record(
    *,
    headers: list[list[str]] | None = None,
    query: str = "",
    body: bytes = b'{"model":"m"}',
    chunks: list[bytes] | None = None,
    resp_headers: list[list[str]] | None = None,
    **extra: Any,
) -> Exchange:
    chunks = [b"data: {}\n\n"] if chunks is None else chunks
    return exchange(
        {
            "id": "x1",
            "request": {
                "method": "POST",
                "path": "/v1/chat/completions",
                "query": query,
                "headers": headers if headers is not None else [["Content-Type", "application/json"]],
                "body": body,
            },
            "response": {
                "status": 200,
                "headers": resp_headers or [],
                "chunks": chunks,
                "chunk_us": [1] * len(chunks),
            },
            "error": None,
            **extra,
        }
    )


def everything(rec: Exchange) -> bytes:
    """The record as bytes, with the reads joined as a reader of the body sees them (so a split secret shows)."""
    fields = as_map(rec)
    chunks = rec.response.chunks
    return orjson.dumps({**fields, "response": {**fields["response"], "chunks": []}}, default=bytes.hex) + b"".join(
        chunks
    )


def assert_clean(rec: Exchange, *secrets: str) -> None:
    blob = everything(rec)
    for secret in secrets:
        for form in secret_forms(secret):
            assert form not in blob, (secret, form)


def echo(*texts: str) -> list[bytes]:
    return [f'data: {{"echo":"{t}"}}\n\n'.encode() for t in texts]


# -- read boundaries ---------------------------------------------------------------------------------------------


def test_a_key_split_across_two_reads_is_scrubbed_and_every_read_keeps_its_place() -> None:
    chunks = [b'data: {"echo":"' + KEY[:9].encode(), KEY[9:].encode() + b'"}\n\n', b"data: [DONE]\n\n"]
    rec = record(headers=[["Authorization", f"Bearer {KEY}"]], chunks=chunks)
    Redactor().redact_exchange(rec)
    got = rec.response.chunks
    assert got == [b'data: {"echo":"[REDACTED]', b'"}\n\n', b"data: [DONE]\n\n"]
    assert "scrubbed:response.chunks" in rec.redacted


def test_the_proxys_own_upstream_key_is_scrubbed_across_reads() -> None:
    upstream_key = "upstream-key-ABCDEFGH-42"
    chunks = [b"data: " + upstream_key[:5].encode(), upstream_key[5:12].encode(), upstream_key[12:].encode() + b"\n\n"]
    rec = record(chunks=chunks)
    Redactor(extra_values=(upstream_key,)).redact_exchange(rec)
    assert rec.response.chunks == [b"data: [REDACTED]", b"", b"\n\n"]


@given(
    st.binary(max_size=40),
    st.binary(max_size=40),
    st.lists(st.integers(min_value=0, max_value=200), max_size=6),
)
def test_scrub_reads_equals_scrubbing_the_joined_bytes_whatever_the_split(
    before: bytes, after: bytes, cuts: list[int]
) -> None:
    data = before + KEY.encode() + after + KEY.encode()
    points = sorted({min(c, len(data)) for c in cuts})
    reads = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    forms = SecretSet([KEY]).forms()
    out = scrub_reads(reads, forms)
    assert out is not None and len(out) == len(reads)
    whole = scrub_reads([data], forms)
    assert whole is not None
    assert b"".join(out) == whole[0]
    assert KEY.encode() not in b"".join(out)


@given(
    st.lists(st.sampled_from([b"x", b"sk-live-", KEY.encode(), b"0123", b"abcdef", b"\n\n", b"%2F"]), max_size=30),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_a_large_body_is_searched_read_by_read_and_finds_what_the_joined_search_finds(
    pieces: list[bytes], cuts: list[int]
) -> None:
    # Past JOIN_LIMIT the reads are searched one by one with an overlap (a 50 MB body is never copied whole): the
    # spans must be exactly those of the joined bytes, wherever the reads are cut.
    data = b"".join(pieces)
    points = sorted({min(c, len(data)) for c in cuts})
    reads = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    forms = SecretSet([KEY, "0123abcdef"]).forms()
    saved = redact.JOIN_LIMIT
    redact.JOIN_LIMIT = -1
    try:
        assert redact._read_spans(reads, forms) == redact._spans(data, forms)
    finally:
        redact.JOIN_LIMIT = saved


def test_a_large_body_is_scrubbed_in_steps_of_a_window_each_as_the_joined_search_scrubs_it() -> None:
    # The recording task runs one window per loop step: a long answer must not be one long step, and the secrets
    # found must be those of the body joined, a secret split across two windows included.
    size = 700
    first_window = -(-redact.JOIN_LIMIT // size) * size  # the first window ends at the first read end past it
    key = KEY.encode()
    data = b"x" * (first_window - 10) + key + (b"y" * 1000 + key) * 40
    reads = [data[i : i + size] for i in range(0, len(data), size)]
    assert b"".join(reads) == data
    forms = SecretSet([KEY]).forms()
    found: list[str] = []
    steps = redact.scrub_body_steps([], reads, forms, found)
    yields = 0
    while True:
        try:
            next(steps)
            yields += 1
        except StopIteration as done:
            out = done.value
            break
    assert yields >= len(data) // redact.JOIN_LIMIT - 1
    whole = scrub_reads([data], forms)
    assert out is not None and whole is not None and len(out) == len(reads)
    assert b"".join(out) == whole[0]
    assert KEY.encode() not in b"".join(out) and found == ["scrubbed:response.chunks"]


@pytest.mark.parametrize("text", ["a-then-b-inside-it", "a-touching-c", "c-between-two-a"])
def test_secrets_that_overlap_or_touch_at_any_window_boundary_are_found_as_in_the_joined_bytes(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    # A long body is searched a window at a time, each with the last bytes of the one before (one byte less than the
    # longest form): a secret that begins in one window and ends in the next, one that overlaps another found in the
    # window before, or one that begins where another ends, must come out as the search of the joined bytes finds
    # them. Windows of 24 or 40 bytes instead of 16 KiB put every case at a boundary with a short body.
    a, b, c = b"sk-live-0123456789abcdef", b"0123456789abcdef-and-more-secret", b"tok-ABCDEFGH"
    joined = {"a-then-b-inside-it": a + b[16:], "a-touching-c": a + c, "c-between-two-a": a + c + a}[text]
    # A value may begin with any byte: one beginning with X (a body's first window has nothing before it to carry).
    forms = [a, b, c, b"XX" + a]
    for limit in (24, 40):
        monkeypatch.setattr(redact, "JOIN_LIMIT", limit)
        for offset in range(2 * limit + len(b)):
            data = b"x" * offset + joined + b"y" * limit
            expected = redact._spans(data, forms)
            for size in (1, 3, 7, limit):
                reads = [data[i : i + size] for i in range(0, len(data), size)]
                assert redact._read_spans(reads, forms) == expected, (limit, offset, size)
                out = scrub_reads(reads, forms)
                assert out is not None and b"".join(out) == _cut_whole(data, expected), (limit, offset, size)


def _cut_whole(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """The joined bytes with each span replaced by the marker: what the scrubbed reads must join to."""
    out, pos = b"", 0
    for s, e in spans:
        out += data[pos:s] + REDACTED.encode()
        pos = e
    return out + data[pos:]


# -- headers -----------------------------------------------------------------------------------------------------


def test_basic_auth_credentials_are_scrubbed_decoded_and_encoded() -> None:
    password = "hunter2-very-secret-pw"
    token = base64.b64encode(f"alice:{password}".encode()).decode()
    # An upstream that echoes the password, the decoded pair, and the header's base64 inside a longer base64 text.
    inner = base64.b64encode(f"xx alice:{password} yy".encode()).decode()
    rec = record(headers=[["Authorization", f"Basic {token}"]], chunks=echo(password, f"alice:{password}", inner))
    Redactor().redact_exchange(rec)
    assert_clean(rec, password, f"alice:{password}")
    assert rec.request.headers == [["Authorization", REDACTED]]


def test_token_scheme_and_lower_case_bearer_are_scrubbed_when_echoed() -> None:
    for header in (f"Token {KEY}", f"bearer {KEY}", f"BEARER {KEY}"):
        rec = record(headers=[["Authorization", header]], chunks=echo(f"you sent {KEY}"))
        Redactor().redact_exchange(rec)
        assert KEY.encode() not in b"".join(rec.response.chunks), header


def test_a_credential_holding_spaces_is_scrubbed_whole_after_its_scheme() -> None:
    # The scheme ends at the first space; everything after it is the credential, spaces and all.
    credential = "abc def ghij-0123456789"
    rec = record(headers=[["Authorization", f"Token {credential}"]], chunks=echo(f"got {credential}."))
    Redactor().redact_exchange(rec)
    assert rec.response.chunks == echo(f"got {REDACTED}.")


def test_a_set_cookies_attributes_are_not_secrets() -> None:
    # Only the cookie's own value is a secret; Domain, Path and Expires name public things a body may mention.
    cookie = "sessionid-0123456789abcdef"
    header = f"sid={cookie}; Domain=api.example.com; Path=/v1/chat/completions; Expires=Wed, 21 Oct 2037 07:28:00 GMT"
    kept = ("api.example.com", "/v1/chat/completions", "Wed, 21 Oct 2037 07:28:00 GMT")
    rec = record(resp_headers=[["Set-Cookie", header]], chunks=echo(cookie, *kept))
    Redactor().redact_exchange(rec)
    assert rec.response.chunks == echo(REDACTED, *kept)


def test_a_response_set_cookie_is_redacted_and_its_value_scrubbed_where_echoed() -> None:
    cookie = "sessionid-0123456789abcdef"
    rec = record(
        resp_headers=[["Set-Cookie", f"sid={cookie}; Path=/; HttpOnly"], ["Content-Type", "text/event-stream"]],
        chunks=echo(cookie),
    )
    Redactor().redact_exchange(rec)
    assert rec.response.headers[0] == ["Set-Cookie", REDACTED]
    assert rec.response.headers[1] == ["Content-Type", "text/event-stream"]
    assert "response.headers.set-cookie" in rec.redacted
    assert_clean(rec, cookie)


def test_a_secret_echoed_in_another_header_and_in_the_error_is_scrubbed() -> None:
    rec = record(
        headers=[["x-api-key", KEY]],
        resp_headers=[["X-Echo", f"got {KEY}"]],
        error=f"upstream failed: bad key {KEY}",
        upstream={"url": "http://u", "headers": {"x-request-id": KEY}},
        tags={"note": KEY},
    )
    Redactor().redact_exchange(rec)
    assert_clean(rec, KEY)
    assert rec.response.headers == [["X-Echo", f"got {REDACTED}"]]
    assert rec.error == f"upstream failed: bad key {REDACTED}"


def test_configured_secret_headers_are_matched_case_insensitively() -> None:
    rec = record(headers=[["X-Custom-Auth", KEY]], chunks=echo(KEY))
    Redactor.with_extra(headers=["x-CUSTOM-auth"]).redact_exchange(rec)
    assert rec.request.headers == [["X-Custom-Auth", REDACTED]]
    assert_clean(rec, KEY)
    plain = record(headers=[["X-Custom-Auth", KEY]])
    Redactor().redact_exchange(plain)
    assert plain.request.headers == [["X-Custom-Auth", KEY]]  # not secret unless configured


# -- query -------------------------------------------------------------------------------------------------------


def test_a_query_key_is_scrubbed_percent_decoded_and_as_sent() -> None:
    secret = "SECRET123/x+y z"
    sent = quote(secret, safe="")
    rec = record(query=f"model=m&key={sent}", chunks=echo(secret, sent, json.dumps(secret)[1:-1].replace("/", "\\/")))
    Redactor().redact_exchange(rec)
    assert rec.request.query == f"model=m&key={REDACTED}"
    assert_clean(rec, secret)
    assert "request.query.key" in rec.redacted


def test_secret_query_names_are_matched_case_insensitively_and_other_bytes_kept() -> None:
    rec = record(query=f"API_KEY={KEY}&Access_Token={KEY}x&q=a%20b&flag")
    Redactor().redact_exchange(rec)
    assert rec.request.query == f"API_KEY={REDACTED}&Access_Token={REDACTED}&q=a%20b&flag"


# -- JSON body fields ----------------------------------------------------------------------------------------------


def test_default_body_fields_are_redacted_at_any_depth_and_inside_arrays() -> None:
    body = {
        "model": "m",
        "api_key": "k-api-0123456789",
        "metadata": {"apiKey": "k-camel-0123456789", "deeper": [{"password": "pw-0123456789"}]},
        "messages": [{"role": "user", "content": "hi", "secret": "s-0123456789"}],
        "tools": [[{"Token": "tok-0123456789"}]],
        "token": 12345,  # not a string: left alone
        "short": {"password": "abc"},  # short values too, where they stand
    }
    rec = record(body=json.dumps(body).encode(), chunks=echo("k-api-0123456789 and pw-0123456789"))
    Redactor().redact_exchange(rec)
    got = json.loads(rec.request.body)
    assert got["api_key"] == REDACTED
    assert got["metadata"]["apiKey"] == REDACTED
    assert got["metadata"]["deeper"][0]["password"] == REDACTED
    assert got["messages"][0]["secret"] == REDACTED and got["messages"][0]["content"] == "hi"
    assert got["tools"][0][0]["Token"] == REDACTED
    assert got["token"] == 12345
    assert got["short"]["password"] == REDACTED
    assert_clean(rec, "k-api-0123456789", "k-camel-0123456789", "pw-0123456789", "s-0123456789", "tok-0123456789")
    assert "request.body.metadata.deeper.password" in rec.redacted


def test_a_configured_field_is_redacted_whatever_it_holds_and_its_value_scrubbed_where_echoed() -> None:
    body = {"model": "m", "extra": {"client_secret": "cs-0123456789"}, "pin": {"a": 1}}
    rec = record(body=json.dumps(body).encode(), chunks=echo("cs-0123456789"))
    Redactor.with_extra(json_fields=["client_secret", "PIN"]).redact_exchange(rec)
    got = json.loads(rec.request.body)
    assert got["extra"]["client_secret"] == REDACTED and got["pin"] == REDACTED
    assert_clean(rec, "cs-0123456789")


def test_a_configured_field_holding_an_object_list_or_number_is_scrubbed_wherever_its_values_are_echoed() -> None:
    # --secret-field org: before, the field was redacted but none of what it held was scrubbed where echoed.
    org = {"id": "org-0123456789", "pins": [987654321012, "pin-abcdefghij"], "deep": {"code": "deep-zyxwvutsrq"}}
    body = {"model": "m", "org": org, "account": 123456789012345, "flags": ["flag-one-secret", "flag-two-secret"]}
    echoed = [
        json.dumps(org),  # the whole object as Python writes it
        json.dumps(org, separators=(",", ":")),  # and compact
        "org-0123456789 and deep-zyxwvutsrq, pin-abcdefghij",  # its strings one by one
        "pin 987654321012, account 123456789012345",  # its numbers as text
        json.dumps(["flag-one-secret", "flag-two-secret"]),
    ]
    rec = record(body=json.dumps(body).encode(), chunks=[f"data: {e}\n\n".encode() for e in echoed])
    Redactor.with_extra(json_fields=["org", "account", "flags"]).redact_exchange(rec)
    got = json.loads(rec.request.body)
    assert got["org"] == got["account"] == got["flags"] == REDACTED
    assert_clean(rec, *echoed[:2], "org-0123456789", "pin-abcdefghij", "deep-zyxwvutsrq", "987654321012")
    assert_clean(rec, "123456789012345", "flag-one-secret", "flag-two-secret")


def test_a_body_without_secret_fields_keeps_its_exact_bytes() -> None:
    body = b'{ "model" : "m",  "messages": [] }'
    rec = record(body=body)
    Redactor().redact_exchange(rec)
    assert rec.request.body is body


def test_a_body_nested_absurdly_deep_is_left_alone_without_a_recursion_error() -> None:
    body = b'{"a":' * 5000 + b"1" + b"}" * 5000
    rec = record(body=body)
    Redactor().redact_exchange(rec)
    assert rec.request.body == body


# -- forms -------------------------------------------------------------------------------------------------------


def test_json_escaped_forms_are_scrubbed() -> None:
    secret = "sk/proj-éüABC123"
    escaped_slash = json.dumps(secret)[1:-1].replace("/", "\\/")
    every_char = "".join(f"\\u{ord(c):04x}" for c in secret)
    upper_hex = "".join(f"\\u{ord(c):04X}" for c in secret)
    rec = record(headers=[["api-key", secret]], chunks=echo(escaped_slash, every_char, upper_hex))
    Redactor().redact_exchange(rec)
    body = b"".join(rec.response.chunks)
    assert body.count(REDACTED.encode()) == 3


def test_a_request_body_holding_the_key_with_every_character_escaped_is_scrubbed() -> None:
    # A client that pastes its key into a message as \u-escapes: found outside the response's reads too.
    every_char = "".join(f"\\u{ord(c):04x}" for c in KEY)
    body = b'{"model":"m","messages":[{"role":"user","content":"key: ' + every_char.encode() + b'"}]}'
    rec = record(headers=[["api-key", KEY]], body=body)
    Redactor().redact_exchange(rec)
    assert rec.request.body == body.replace(every_char.encode(), REDACTED.encode())


def test_a_read_that_begins_with_the_escaped_key_is_scrubbed() -> None:
    # The \u-escaped forms are only searched where a backslash-u occurs at all: one at the very first byte counts.
    every_char = "".join(f"\\u{ord(c):04x}" for c in KEY).encode()
    rec = record(headers=[["api-key", KEY]], chunks=[every_char + b'"}\n\n', b"data: [DONE]\n\n"])
    Redactor().redact_exchange(rec)
    assert rec.response.chunks == [REDACTED.encode() + b'"}\n\n', b"data: [DONE]\n\n"]


def test_quoted_and_padded_cookie_values_are_scrubbed_where_echoed() -> None:
    # A cookie's value may be quoted (RFC 6265) and may end in base64's '=' padding; the value itself is the secret.
    quoted, padded = "Xq-0123456789abcdefX", "dG9rZW4tMDEyMzQ1Njc4OQ=="
    rec = record(headers=[["Cookie", f'a="{quoted}"; b={padded}']], chunks=echo(f"1 {quoted} 2", f"3 {padded} 4"))
    Redactor().redact_exchange(rec)
    assert rec.response.chunks == echo(f"1 {REDACTED} 2", f"3 {REDACTED} 4")


def test_short_values_are_not_scrubbed_from_bodies() -> None:
    short = "a" * (MIN_SCRUB_LEN - 1)
    rec = record(headers=[["x-api-key", short]], chunks=echo(short))
    Redactor().redact_exchange(rec)
    assert rec.request.headers == [["x-api-key", REDACTED]]
    assert short.encode() in b"".join(rec.response.chunks)


def test_a_record_without_secrets_is_unchanged() -> None:
    rec = record(query="a=1&b=x%2Fy", chunks=echo("hello world, nothing secret here"))
    before = orjson.dumps(as_map(rec), default=bytes.hex)
    Redactor().redact_exchange(rec)
    assert orjson.dumps(as_map(rec), default=bytes.hex) == before
    assert rec.redacted == []


# -- compressed bodies ---------------------------------------------------------------------------------------------


def test_a_secret_inside_a_gzip_stream_is_scrubbed_and_the_reads_still_decode() -> None:
    plain = [*echo("one", f"leaked {KEY}", "three"), b"data: [DONE]\n\n"]
    chunks = encode_reads(plain, ["gzip"])
    rec = record(
        headers=[["Authorization", f"Bearer {KEY}"]],
        resp_headers=[["Content-Encoding", "gzip"], ["Content-Length", str(sum(map(len, chunks)))]],
        chunks=chunks,
    )
    Redactor().redact_exchange(rec)
    got = rec.response.chunks
    assert len(got) == len(chunks)
    decoded = decode_reads(got, ["gzip"])
    assert decoded.error is None
    assert decoded.pieces == [plain[0], echo(f"leaked {REDACTED}")[0], plain[2], plain[3]]
    assert gzip.decompress(b"".join(got)) == b"".join(decoded.pieces)
    assert rec.response.headers[1] == ["Content-Length", str(sum(map(len, got)))]
    # The words docs/proxy.md promises for a body that is no longer the upstream's bytes.
    assert "scrubbed:response.chunks (decoded, scrubbed and gzip-encoded again)" in rec.redacted


def test_a_compressed_body_without_a_secret_keeps_its_wire_bytes() -> None:
    chunks = encode_reads(echo("one", "two"), ["br"])
    rec = record(
        headers=[["Authorization", f"Bearer {KEY}"]], resp_headers=[["Content-Encoding", "br"]], chunks=list(chunks)
    )
    Redactor().redact_exchange(rec)
    assert rec.response.chunks == chunks


# -- the proxy's own errors ----------------------------------------------------------------------------------------


def test_describe_bad_request_never_quotes_the_header_value() -> None:
    message = f"Invalid header value char:\n\n  b'Authorization: Bearer {KEY}\\x01zz'\n        ^"
    text = describe_bad_request(message)
    assert text == "Invalid header value char (header Authorization)"
    assert describe_bad_request(f"Bad status line '{KEY}'") == "Bad status line"
    assert describe_bad_request(None) == "malformed request"
    # Only the colon before the quoted bytes goes: the words keep every letter.
    assert describe_bad_request(f"Bad HTTP version HTTP/1.X: b'{KEY}'") == "Bad HTTP version HTTP/1.X"


def test_a_compressed_body_past_the_decoding_limit_is_not_kept_unsearched(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.core.decoding

    monkeypatch.setattr(bench.core.decoding, "MAX_DECODED", 1000)
    tail = f"and then {KEY}".encode()
    chunks = encode_reads([b"x" * 900, b"y" * 900, tail], ["gzip"])
    rec = record(
        headers=[["Authorization", f"Bearer {KEY}"]], resp_headers=[["Content-Encoding", "gzip"]], chunks=chunks
    )
    Redactor().redact_exchange(rec)
    decoded = decode_reads(rec.response.chunks, ["gzip"])
    # Kept: what decoded (and was searched) up to the limit; the rest, the key in it, is not.
    assert decoded.pieces == [b"x" * 900, b"y" * 100, b""]
    assert KEY.encode() not in b"".join(rec.response.chunks) + decoded.body
    assert any("dropped unsearched" in r for r in rec.redacted)


def test_a_query_value_is_scrubbed_decoded_either_way_a_plus_can_be_read() -> None:
    # `+` is a space to a form decoder and a plus to a plain percent-decoder: an upstream may echo either.
    rec = record(query="token=Ab%2FCd+Ef12345", chunks=echo("Ab/Cd+Ef12345", "Ab/Cd Ef12345"))
    Redactor().redact_exchange(rec)
    assert b"".join(rec.response.chunks).count(REDACTED.encode()) == 2


def test_an_echo_is_replaced_where_it_stands_and_everything_else_is_kept_and_listed_exactly() -> None:
    # The key pasted into a prompt twice (the request body is bytes), in a nested map and in strings: each occurrence
    # becomes the marker, every byte around it stays, and `redacted` names exactly the places that held it.
    body = b'{"messages":[{"role":"user","content":"' + KEY.encode() + b" and " + KEY.encode() + b'!"}]}'
    rec = record(
        headers=[["Authorization", f"Bearer {KEY}"]],
        body=body,
        error=f"bad key {KEY}",
        upstream={"url": "http://u", "headers": {"x-request-id": KEY, "x-other": "kept"}},
        tags={"note": f"{KEY}{KEY}", "run": "r1"},
    )
    Redactor().redact_exchange(rec)
    assert rec.request.body == b'{"messages":[{"role":"user","content":"[REDACTED] and [REDACTED]!"}]}'
    assert rec.error == f"bad key {REDACTED}"
    assert rec.upstream == Upstream(url="http://u", headers={"x-request-id": REDACTED, "x-other": "kept"})
    assert rec.tags == {"note": REDACTED + REDACTED, "run": "r1"}
    assert rec.redacted == [
        "request.headers.authorization",
        "scrubbed:error",
        "scrubbed:request.body",
        "scrubbed:tags.note",
        "scrubbed:upstream.headers.x-request-id",
    ]


def test_values_given_up_front_are_scrubbed_by_a_redactor_with_extras() -> None:
    token = "client-token-9876543210"
    rec = record(chunks=echo(f"hello {token}"), headers=[["X-Custom-Auth", token]])
    Redactor.with_extra(headers=["X-Custom-Auth"], values=[token, ""]).redact_exchange(rec)
    assert rec.request.headers == [["X-Custom-Auth", REDACTED]]
    assert rec.response.chunks == echo(f"hello {REDACTED}")
    rec = record(chunks=echo(f"hello {token}"))  # nowhere else in the record: only what was given says it is secret
    Redactor.with_extra(values=[token]).redact_exchange(rec)
    assert rec.response.chunks == echo(f"hello {REDACTED}") and rec.redacted == ["scrubbed:response.chunks"]


def test_a_percent_encoded_echo_in_lower_case_hex_is_scrubbed() -> None:
    key = "sk/live+key=0123&456"
    for echoed in ("sk%2flive%2bkey%3d0123%26456", "sk%2Flive%2Bkey%3D0123%26456", key):
        rec = record(headers=[["api-key", key]], chunks=echo(f"got {echoed}"))
        Redactor().redact_exchange(rec)
        assert rec.response.chunks == echo(f"got {REDACTED}"), echoed


def test_a_basic_password_with_a_colon_and_each_cookie_value_are_scrubbed_when_echoed() -> None:
    # RFC 7617: the user id ends at the first colon; the password may hold more.
    password = "pass:word-0123456789"
    basic = base64.b64encode(f"me:{password}".encode()).decode()
    cookies = "session=abcdefgh12345678; theme=dark; csrf=zyxwvuts98765432"
    rec = record(
        headers=[["Authorization", f"Basic {basic}"], ["Cookie", cookies]],
        chunks=echo(f"pw {password}", "s abcdefgh12345678", "c zyxwvuts98765432", "theme dark"),
    )
    Redactor().redact_exchange(rec)
    assert rec.response.chunks == echo(f"pw {REDACTED}", f"s {REDACTED}", f"c {REDACTED}", "theme dark")


def test_only_a_valid_basic_credential_is_decoded_into_secrets() -> None:
    # A lenient decoder skips characters outside base64's alphabet and would turn a malformed credential into text that
    # is then scrubbed from every answer: what it decodes to is not a credential, and recorded answers keep it.
    good = base64.b64encode(b"user:correct-horse-battery").decode()
    secrets = SecretSet()
    secrets.add_header_value("authorization", f"Basic {good}")
    assert secrets.values == {f"Basic {good}", good, "user:correct-horse-battery", "correct-horse-battery"}
    bad = good[:4] + "!" + good[4:]
    secrets = SecretSet()
    secrets.add_header_value("authorization", f"Basic {bad}")
    assert secrets.values == {f"Basic {bad}", bad}
    rec = record(headers=[["Authorization", f"Basic {bad}"]], chunks=[b'data: {"a":"correct-horse-battery"}\n\n'])
    Redactor().redact_exchange(rec)
    assert rec.response.chunks == [b'data: {"a":"correct-horse-battery"}\n\n']


def test_scrub_text_reaches_bytes_and_strings_inside_dicts_and_lists_and_says_where() -> None:
    forms = list(secret_forms(KEY))
    strs = [f.decode() for f in forms]
    value = {"metaX": b"a " + KEY.encode() + b" b", "notesX": ["x" + KEY, b"y" + KEY.encode(), 3]}
    found: list[str] = []
    out = redact.scrub_text(value, forms, strs, found, "extra.")
    assert out == {"metaX": b"a [REDACTED] b", "notesX": ["x[REDACTED]", b"y[REDACTED]", 3]}
    assert found == ["scrubbed:extra.metaX", "scrubbed:extra.notesX", "scrubbed:extra.notesX"]


def split(scrubber: BodyScrubber, reads: list[bytes], *hold: int) -> tuple[list[bytes], list[bytes]]:
    steps = scrubber.split_steps(reads, *hold)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: tuple[list[bytes], list[bytes]] = done.value
            return result


def test_a_body_scrubber_finds_every_secret_of_the_request_and_response_heads() -> None:
    # A body written in parts is scrubbed before its record exists: its scrubber must know every secret the record's
    # redaction will find (each kind of place a secret is given in, and the values given up front).
    secrets = {
        "query": "query-secret-0987654321",
        "body": "body-secret-abcdefgh",
        "extra": "extra-secret-zyxwvuts",
        "cookie": "cookie-secret-qwertyuiop",
        "given": "given-value-123456",
        "header": KEY,
    }
    redactor = Redactor.with_extra(json_fields=["extra_field"], values=[secrets["given"]])
    scrubber = redactor.body_scrubber(
        [["Content-Type", "application/json"], ["Authorization", f"Bearer {KEY}"]],
        f"api-version=1&api-key={secrets['query']}",
        json.dumps({"model": "m", "api_key": secrets["body"], "extra_field": secrets["extra"]}).encode(),
        [["Content-Type", "text/event-stream"], ["Set-Cookie", f"session={secrets['cookie']}; Path=/"]],
    )
    reads = [f"data: {value}\n\n".encode() for value in secrets.values()] + [b"data: nothing secret\n\n"]
    out, held = split(scrubber, reads, 0)
    assert out + held == [b"data: [REDACTED]\n\n"] * len(secrets) + [b"data: nothing secret\n\n"]
    assert scrubber.scrubbed


def test_a_body_scrubber_with_nothing_to_scrub_writes_every_read_and_holds_only_what_it_is_asked_to() -> None:
    scrubber = Redactor().body_scrubber([["Accept", "*/*"]], "", b"", [])
    reads = [b"data: a\n\n", b"data: b\n\n"]
    assert split(scrubber, reads) == (reads, [])
    assert split(scrubber, reads, 9) == ([reads[0]], [reads[1]])
    assert not scrubber.scrubbed


def test_a_body_scrubber_holds_the_fewest_last_reads_that_can_hold_the_start_of_a_secret() -> None:
    # A secret that begins in the reads written now must be seen whole: the reads held are the last ones holding at
    # least the longest form's length less one byte, and no more.
    scrubber = BodyScrubber(list(secret_forms(KEY)))
    longest = max(map(len, scrubber.forms))
    reads = [b"x" * 50, b"y", b"z" * (longest - 2)]
    assert split(scrubber, reads, 0) == ([b"x" * 50], [b"y", b"z" * (longest - 2)])
    reads = [b"x" * 50, b"y", b"z" * (longest - 1)]
    assert split(scrubber, reads, 0) == ([b"x" * 50, b"y"], [b"z" * (longest - 1)])
    assert not scrubber.scrubbed


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'[{"model":"m","api_key":"%s"}]', id="a top-level array"),
        pytest.param(b'\n  {"model":"m","api_key":"%s"}', id="leading whitespace"),
        pytest.param(b'{"model":"m","api\\u005fkey":"%s"}', id="the field name escaped"),
    ],
)
def test_a_secret_field_is_found_however_the_json_body_is_written(body: bytes) -> None:
    rec = record(body=body.replace(b"%s", KEY.encode()))
    Redactor().redact_exchange(rec)
    assert KEY.encode() not in rec.request.body
    assert orjson.loads(rec.request.body) in (
        [{"model": "m", "api_key": REDACTED}],
        {"model": "m", "api_key": REDACTED},
    )


def test_a_redacted_json_body_keeps_its_other_text_as_utf8() -> None:
    rec = record(body=json.dumps({"messages": "café ☕", "api_key": KEY}, ensure_ascii=False).encode())
    Redactor().redact_exchange(rec)
    assert rec.request.body == '{"messages": "café ☕", "api_key": "[REDACTED]"}'.encode()


def test_a_json_body_too_deep_to_write_back_is_dropped_whole_when_it_holds_a_secret_field() -> None:
    depth = 1010  # parsed (orjson follows 1024 levels), but json cannot write it back
    body = b'{"api_key":"' + KEY.encode() + b'","x":' + b"[" * depth + b"]" * depth + b"}"
    rec = record(body=body)
    Redactor().redact_exchange(rec)
    assert rec.request.body == REDACTED.encode()
    assert "request.body" in rec.redacted


def test_a_secret_query_value_holding_an_equals_sign_is_redacted_whole() -> None:
    value = base64.b64encode(b"a key of 17 bytes").decode()  # base64 padding: ends with "="
    assert "=" in value
    rec = record(query=f"api-version=2&api-key={value}")
    Redactor().redact_exchange(rec)
    assert rec.request.query == f"api-version=2&api-key={REDACTED}"


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _pieces(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


@pytest.mark.parametrize("size", [1, 2, 5])  # the size of the pieces the key is echoed in
def test_a_key_split_across_events_is_cut_from_every_text_field_that_carries_it(size: int) -> None:
    """Chat content, a tool call's arguments (per call index) and the Responses API's deltas (per output item), each
    echoing the key in pieces, interleaved; events cut across reads. What each field assembles loses the key."""
    said = f"key={KEY};"
    events = []
    for piece in _pieces(said, size):
        events.append({"choices": [{"index": 0, "delta": {"content": piece}}]})
        events.append(
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": piece}}]}}]}
        )
        events.append({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": piece})
    body = b"".join(_event(e) for e in events) + b"data: [DONE]\n\n"
    reads = [body[i : i + 37] for i in range(0, len(body), 37)]
    out = redact.scrub_split_secrets(reads, [KEY])
    assert out is not None and len(out) == len(reads)
    docs = [orjson.loads(line[6:]) for line in b"".join(out).split(b"\n\n") if line.startswith(b"data: {")]
    content = "".join(d["choices"][0]["delta"].get("content", "") for d in docs if "choices" in d)
    arguments = "".join(
        d["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        for d in docs
        if "choices" in d and "tool_calls" in d["choices"][0]["delta"]
    )
    deltas = "".join(d["delta"] for d in docs if d.get("type") == "response.output_text.delta")
    assert content == arguments == deltas == f"key={REDACTED};"
    assert b"".join(out).endswith(b"data: [DONE]\n\n")


def test_text_with_no_split_key_is_left_as_it_is() -> None:
    events = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in _pieces("a harmless answer, sk-live", 3)]
    reads = [_event(e) for e in events]
    assert redact.scrub_split_secrets(reads, [KEY]) is None
    # Pieces of the key in two different fields never join into it.
    halves = [
        {"choices": [{"index": 0, "delta": {"content": KEY[:9]}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": KEY[9:]}}]},
    ]
    assert redact.scrub_split_secrets([_event(e) for e in halves], [KEY]) is None


def test_a_gzip_event_stream_is_searched_decoded_for_a_split_key() -> None:
    events = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in _pieces(f"your key is {KEY}", 4)]
    plain = [_event(e) for e in events]
    headers = [["Content-Type", "text/event-stream"], ["Content-Encoding", "gzip"]]
    reads = encode_reads(plain, ["gzip"])
    record = exchange(
        request={"headers": [["Authorization", f"Bearer {KEY}"]]},
        response={"status": 200, "headers": headers, "chunks": reads, "streamed": True},
    )
    Redactor().redact_exchange(record)
    decoded = b"".join(decode_reads(record.response.chunks, ["gzip"]).pieces)
    text = "".join(orjson.loads(line[6:])["choices"][0]["delta"]["content"] for line in decoded.split(b"\n\n") if line)
    assert text == f"your key is {REDACTED}"
    assert "scrubbed:response.chunks (a secret split across events)" in record.redacted
