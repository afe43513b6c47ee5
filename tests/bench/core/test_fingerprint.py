"""Request fingerprints (rule version 1, docs/cassette-format.md): what makes two requests the same for replay.

Digests are a contract: cassettes store them, replay matches on them. The known answers below were computed once
from the documented rule; any change to them needs a FINGERPRINT_VERSION bump (and a new set of answers).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.core.fingerprint import (
    FINGERPRINT_VERSION,
    SECRET_QUERY_PARAMS,
    UNDECIDED,
    VOLATILE_FIELDS,
    Undecided,
    canonical_body,
    canonical_text,
    canonical_text_fast,
    fingerprint,
    fingerprint_of,
)

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


def test_a_json_body_with_a_lone_surrogate_is_fingerprinted_as_its_raw_bytes() -> None:
    # Valid JSON (an escape for half a surrogate pair) whose text has no UTF-8 form: hashed raw, on both paths the
    # proxy takes (the one-step fingerprint for replay, the two-step one while recording), never an error.
    raw = b'{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}'
    expected = documented("POST /x?\n", b"raw:" + raw)
    assert fingerprint("POST", "/x", "", raw) == expected
    assert fingerprint_of("POST", "/x", "", raw, json.loads(raw)) == expected


def test_only_trailing_slashes_are_dropped_from_the_path() -> None:
    assert fingerprint("GET", "/v1/modelsX", "", b"") != fingerprint("GET", "/v1/models", "", b"")
    assert fingerprint("GET", "/v1/models//", "", b"") == fingerprint("GET", "/v1/models", "", b"")
    assert fingerprint("GET", "/", "", b"") == fingerprint("GET", "", "", b"")


# -- the fast path: orjson's text where it is json's, json's path everywhere else --------------------------------


def json_text(raw: bytes) -> bytes | None:
    """The canonical text by the standard library alone, as rule version 1 was first written (None: raw bytes)."""
    if not raw:
        return b"{}"
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in VOLATILE_FIELDS}
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    except RecursionError:
        return None


def same_as_json(raw: bytes) -> None:
    """`canonical_text` (and the fast path when it decides) gives json's bytes, or None (the raw bytes hashed) where
    json's text cannot be written as UTF-8 (a lone surrogate: the rule has no text for it)."""
    try:
        expected: bytes | None = json_text(raw)
    except UnicodeEncodeError:
        expected = None
    fast = canonical_text_fast(raw)
    if not isinstance(fast, Undecided):
        assert fast == expected, raw
    assert canonical_text(raw) == expected, raw
    assert fingerprint("POST", CHAT, "", raw) == documented(
        f"POST {CHAT}?\n", b"raw:" + raw if expected is None else expected
    )


NUMBER = r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?"
KEYS = st.sampled_from(["a", "b", "A", "é", "😀", "\x7f", "\u2028", "stream", "user", "model", "", "a\x00", "Z"])


def json_string(text: str, how: int) -> str:
    if how == 0:
        return json.dumps(text)  # every non-ASCII character escaped, astral ones as surrogate pairs
    if how == 1:
        return json.dumps(text, ensure_ascii=False)
    return '"' + "".join(f"\\u{ord(c):04X}" if ord(c) < 0x10000 else c for c in text) + '"'


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 0) -> str:
    """Arbitrary JSON text, written in ways a serialiser would not: number literals of any length and exponent (big
    integers, floats past a double, subnormals), strings escaped or not, lone surrogates, duplicate keys, spacing."""
    kinds = ["null", "true", "false", "number", "float", "string", "surrogate", "special"]
    if depth < 4:
        kinds += ["array", "object", "object"]
    kind = draw(st.sampled_from(kinds))
    space = draw(st.sampled_from(["", " ", "\n\t"]))
    if kind in ("null", "true", "false"):
        return kind
    if kind == "number":
        return draw(st.from_regex(NUMBER, fullmatch=True))
    if kind == "float":
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False)))
    if kind == "string":
        return json_string(draw(st.text(max_size=12)), draw(st.integers(0, 2)))
    if kind == "surrogate":
        return f'"a\\u{draw(st.integers(0xD800, 0xDFFF)):04x}b"'
    if kind == "special":
        return draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "1" * 400]))
    if kind == "array":
        items = draw(st.lists(json_texts(depth + 1), max_size=4))
        return "[" + space + ("," + space).join(items) + "]"
    pairs = draw(st.lists(st.tuples(KEYS, json_texts(depth + 1)), max_size=5))
    return "{" + ",".join(f"{json_string(k, draw(st.integers(0, 2)))}:{space}{v}" for k, v in pairs) + "}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_texts())
def test_the_fast_path_gives_json_s_canonical_text_for_any_json(text: str) -> None:
    same_as_json(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.floats(), st.integers(), st.text()))
def test_the_fast_path_gives_json_s_text_for_any_number_or_string(value: object) -> None:
    same_as_json(json.dumps({"v": value, "stream": True}).encode())
    same_as_json(json.dumps([value], ensure_ascii=False).encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_the_fast_path_agrees_on_bytes_that_are_not_json(raw: bytes) -> None:
    same_as_json(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"123456789012345678901234567890", b"-9223372036854775809", b"18446744073709551616", b"1e400",
        b"1" + b"0" * 400 + b".0", b"1e-5", b"0.00001234", b"1e16", b"1e15", b"9999999999999998.0", b"-0", b"-0.0",
        b'{"a":1,"a":2}', b'"\\ud800"', b"\xef\xbb\xbf{}", b'{"a":[]}'.replace(b"[]", b"[" * 300 + b"]" * 300),
        b"NaN", b'"\\u0000\\u001f\\b\\f\\n\\r\\t\\u007f\\u2028\\u0085"', b'{"\xf0\x9f\x98\x80":1,"\xef\xbf\xbf":2}',
        b'\x00{"a":1}', b'"a\x00"', b'{"a":0.1,"b":1.5,"c":100.0,"temperature":0.7}',
    ],
)  # fmt: skip
def test_the_fast_path_where_json_and_orjson_differ(raw: bytes) -> None:
    same_as_json(raw)


def test_the_fast_path_decides_a_usual_chat_request() -> None:
    # Floats such as a temperature are written alike by both: a chat request never needs json's path.
    raw = body(model="m", messages=[{"role": "user", "content": "Hi"}], temperature=0.7, top_p=0.95, max_tokens=64)
    assert canonical_text_fast(raw) == json_text(raw)
    assert canonical_text_fast(b"1e-05") is UNDECIDED


@pytest.mark.parametrize("query", ["", "b=2&a=1&api_key=s"])
@pytest.mark.parametrize("raw", [HI, CAFE, body(model="m", stream=True, messages=[]), b"{bad", b""])
def test_the_recording_path_gives_the_replay_path_s_digest(query: str, raw: bytes) -> None:
    # Recording fingerprints in two steps (parse, then hash: fingerprint_of); replay in one. They must agree, or a
    # recorded exchange would never be found again.
    digest = fingerprint("POST", CHAT, query, raw)
    assert fingerprint_of("POST", CHAT, query, raw, canonical_body(raw)) == digest
    assert digest != fingerprint("POST", CHAT, query + "&c=3", raw)
