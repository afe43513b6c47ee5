"""Agent sessions: what links an exchange to the ones before it (bench.scorer.sessions), read from hand-written
requests and answers, and the linker over traffic lines in the scores file's order."""

from __future__ import annotations

import gzip
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bench.core.parse import parse_exchange
from bench.core.sse import event_payloads
from bench.scorer import sessions
from bench.scorer.results import SessionKeys, TrafficLine
from bench.scorer.sessions import SessionLinker, link_all, new_session, response_id, session_keys
from tests.support.records import exchange


def _record(path: str, body: dict[str, Any], chunks: list[bytes], headers: list[list[str]] | None = None, **kw: Any):
    return exchange(
        request={"method": "POST", "path": path, "body": json.dumps(body).encode(), "headers": headers or []},
        response={"status": 200, "chunks": chunks, "chunk_us": [10] * len(chunks), **kw},
    )


def _keys(record: Any) -> tuple[str | None, SessionKeys]:
    return response_id(record), session_keys(record, parse_exchange(record))


CHAT_CALL = (
    b'data: {"id":"chatcmpl-A1","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,'
    b'"id":"call_X9","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}}]}\n\n'
)


def test_a_chat_answer_gives_its_id_and_calls_and_the_next_request_carries_the_call() -> None:
    first = _record(
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        [CHAT_CALL, b'data: {"id":"chatcmpl-A1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'],
        streamed=True,
    )
    rid, keys = _keys(first)
    assert rid == "chatcmpl-A1"
    assert keys == SessionKeys(calls_out=["call_X9"])
    follow = _record(
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "call_X9", "type": "function", "function": {}}]},
                {"role": "tool", "tool_call_id": "call_X9", "content": "sunny"},
            ],
        },
        [b'{"id":"chatcmpl-B2","choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}'],
    )
    rid, keys = _keys(follow)
    assert rid == "chatcmpl-B2" and keys.calls_in == ["call_X9"] and keys.calls_out == []


def test_responses_keys_previous_response_outputs_conversation_and_a_gzip_body() -> None:
    body = {
        "model": "m",
        "previous_response_id": "resp_1",
        "conversation": {"id": "conv_7"},
        "input": [
            {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_a", "output": "x"},
            {"type": "custom_tool_call_output", "call_id": "call_b", "output": "y"},
            {"role": "user", "content": "and?"},
        ],
    }
    answer = gzip.compress(b'{"id":"resp_2","object":"response","status":"completed","output":[]}', mtime=0)
    record = _record("/v1/responses", body, [answer[:9], answer[9:]], headers=[["Content-Encoding", "gzip"]])
    record.response.headers = [["Content-Encoding", "gzip"]]
    rid, keys = _keys(record)
    assert rid == "resp_2"
    assert keys == SessionKeys(previous_response_id="resp_1", calls_in=["call_a", "call_b"], client_session="conv_7")


def test_a_session_header_wins_over_traceparent_and_bad_ids_are_left_out() -> None:
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    chunks = [b'{"id":"' + b"x" * 300 + b'"}']
    rid, keys = _keys(_record("/v1/chat/completions", {"messages": []}, chunks, [["traceparent", trace]]))
    assert rid is None  # over 200 characters: not an id
    assert keys.client_session == "trace:0af7651916cd43dd8448eb211c80319c"
    headers = [["traceparent", trace], ["X-Session-Id", "agent-42"]]
    assert _keys(_record("/v1/chat/completions", {"messages": []}, chunks, headers))[1].client_session == "agent-42"
    zeros = [["traceparent", "00-" + "0" * 32 + "-b7ad6b7169203331-01"]]
    assert _keys(_record("/v1/chat/completions", {"messages": []}, chunks, zeros))[1].client_session is None


def _line(ident: str, **keys: Any) -> TrafficLine:
    rid = keys.pop("response_id", None)
    return TrafficLine(cassette="c.cassette", id=ident, response_id=rid, session_keys=SessionKeys(**keys))


def test_the_linker_follows_previous_response_ids_calls_and_client_sessions() -> None:
    lines = link_all(
        [
            _line("x1", response_id="resp_1", calls_out=["call_1"]),
            _line("x2", response_id="resp_2"),  # unrelated
            _line("x3", calls_in=["call_1"], response_id="resp_3"),
            _line("x4", previous_response_id="resp_3"),
            _line("x5", client_session="abc"),
            _line("x6", client_session="abc"),
            _line("x7", previous_response_id="resp_unknown"),
        ]
    )
    sessions = [line.session for line in lines]
    assert sessions[0] == sessions[2] == sessions[3] != sessions[1]
    assert sessions[4] == sessions[5] == "abc"
    assert sessions[6] not in sessions[:6]
    assert [line.session_link for line in lines] == [
        None,
        None,
        "tool_call",
        "previous_response_id",
        None,
        "client_session",
        None,
    ]
    # A session's id is derived from its first exchange (cassette and id), independently of the order of others.
    import hashlib

    assert sessions[0] == "s-" + hashlib.sha256(b"c.cassette\0x1").hexdigest()[:16] == new_session(_line("x1"))


def test_an_id_given_again_links_to_the_latest_exchange_that_gave_it() -> None:
    # A replay answers with the recording's ids: its continuation belongs to the replay, not the recording.
    lines = link_all(
        [
            _line("x1", calls_out=["call_1"]),
            _line("x2", calls_in=["call_1"]),
            _line("y1", calls_out=["call_1"]),
            _line("y2", calls_in=["call_1"]),
        ]
    )
    assert lines[0].session == lines[1].session != lines[2].session == lines[3].session


def test_the_linker_forgets_the_oldest_ids_past_its_limit() -> None:
    linker = SessionLinker(limit=2)
    first = linker.link(_line("x1", response_id="r1"))
    linker.link(_line("x2", response_id="r2"))
    linker.link(_line("x3", response_id="r3"))
    assert linker.link(_line("x4", previous_response_id="r1")).session != first.session
    assert linker.link(_line("x5", previous_response_id="r3")).session_link == "previous_response_id"


def test_a_line_linked_in_place_is_the_line_encoded_whole() -> None:
    from bench.scorer.scores_io import dumps

    lines = [
        _line("x1", response_id="resp_1", calls_out=["call_1"]),
        _line("x2", calls_in=["call_1"], client_session='a "quoted" id'),
        _line("x3", previous_response_id="resp_1"),
    ]
    lines[1].unknown_events = {"session": 2}  # a key named like the field, elsewhere in the line
    encoded = [dumps(line) for line in lines]
    in_place, whole = SessionLinker(), SessionLinker()
    got = [in_place.link_encoded(e) for e in encoded]
    assert got == [dumps(whole.link(line)) for line in lines]
    assert b'"session_link":"tool_call"' in got[1]


@given(
    name=st.sampled_from([b"response.created", b"", b"x\ry"]),
    framing=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    data=st.sampled_from([b'{"response":{"id":"resp_1"}}', b'{"id":"chatcmpl-1"}', b"{}", b"not json"]),
    lead=st.sampled_from([b"", b"\xef\xbb\xbf", b": ping\n\n"]),
    cut=st.integers(0, 3),
)
def test_the_first_reads_id_is_the_one_the_sse_split_gives(
    name: bytes, framing: bytes, data: bytes, lead: bytes, cut: int
) -> None:
    # The one-read shortcut (`data:`, or the Responses API's `event:` then `data:`) must find what splitting the
    # stream finds, whatever the framing.
    event = (b"event: " + name + framing if name else b"") + b"data: " + data + framing + framing
    event = lead + event[: len(event) - cut]
    rest = b'data: {"id":"later"}\n\n'
    _, payloads, _ = event_payloads([event, rest], [0, 0])
    expected = next(filter(None, map(sessions._payload_id, payloads)), None)
    assert sessions._first_id([event, rest], True) == expected
