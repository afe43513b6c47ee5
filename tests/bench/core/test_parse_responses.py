from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core.cassette.records import Exchange
from bench.core.parse import PARSER_VERSION, parse_exchange
from bench.core.parsed import ParsedExchange
from tests.support.records import exchange

USAGE = {
    "input_tokens": 40,
    "input_tokens_details": {"cached_tokens": 8},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 2},
    "total_tokens": 47,
}


def event(kind: str, seq: int, **fields: Any) -> bytes:
    obj = {"type": kind, "sequence_number": seq, **fields}
    return f"event: {kind}\n".encode() + b"data: " + json.dumps(obj).encode() + b"\n\n"


def response_obj(status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": "m-served",
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
    }


def tool_and_text_stream(terminal: str = "response.completed") -> list[bytes]:
    """A reasoning summary, a text answer in two deltas and a function call in two argument deltas."""
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}
    done_call = {**call, "arguments": '{"city": "Paris"}', "status": "completed"}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": [], "status": "in_progress"}
    out = [
        event("response.created", 0, response=response_obj("in_progress", [])),
        event("response.in_progress", 1, response=response_obj("in_progress", [])),
        event("response.output_item.added", 2, output_index=0, item={"type": "reasoning", "id": "rs_1", "summary": []}),
        event("response.reasoning_summary_text.delta", 3, output_index=0, item_id="rs_1", delta="Think."),
        event("response.output_item.added", 4, output_index=1, item=message),
        event("response.content_part.added", 5, output_index=1, content_index=0, part={"type": "output_text"}),
        event("response.output_text.delta", 6, output_index=1, content_index=0, item_id="msg_1", delta="It is "),
        event("response.output_text.delta", 7, output_index=1, content_index=0, item_id="msg_1", delta="sunny."),
        event("response.output_text.done", 8, output_index=1, content_index=0, text="It is sunny."),
        event("response.output_item.added", 9, output_index=2, item=call),
        event("response.function_call_arguments.delta", 10, output_index=2, item_id="fc_1", delta='{"city": '),
        event("response.function_call_arguments.delta", 11, output_index=2, item_id="fc_1", delta='"Paris"}'),
        event("response.function_call_arguments.done", 12, output_index=2, arguments='{"city": "Paris"}'),
        event("response.output_item.done", 13, output_index=2, item=done_call),
    ]
    final = response_obj("completed", [done_call], USAGE)
    if terminal == "response.incomplete":
        final = {**final, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    if terminal:
        out.append(event(terminal, 14, response=final))
    return out


def record(chunks: list[bytes], *, streamed: bool = True, status: int = 200, path: str = "/v1/responses") -> Exchange:
    return exchange(
        {
            "id": "x1",
            "request": {"method": "POST", "path": path, "body": b'{"model":"m"}'},
            "response": {"status": status, "streamed": streamed, "chunks": chunks, "chunk_us": [1000] * len(chunks)},
            "outcome": "complete",
        }
    )


def test_stream_text_reasoning_and_tool_call() -> None:
    p = parse_exchange(record(tool_and_text_stream()))
    assert p.endpoint == "responses"
    assert p.content == "It is sunny."
    assert p.reasoning == "Think."
    assert [(c.id, c.name, c.parsed_arguments) for c in p.tool_calls] == [("call_1", "get_weather", {"city": "Paris"})]
    assert p.finish_reason == "tool_calls"
    assert p.model == "m-served"
    assert p.usage == USAGE
    assert p.findings == [] and p.unknown_events == {}
    # Token events: 1 reasoning + 2 text + 2 argument deltas, one read each, reads 1 ms apart.
    assert p.timing.n_events == 5
    assert p.timing.ttft_us == 4000 and p.timing.e2el_us == 12000
    assert p.timing.itl_us == [3000, 1000, 3000, 1000]
    assert (p.timing.output_tokens, p.timing.tokens_source) == (7, "usage")
    assert p.timing.tpot_us == (12000 - 4000) / 6


def test_incomplete_cut_and_failed_streams() -> None:
    p = parse_exchange(record(tool_and_text_stream("response.incomplete")))
    assert p.finish_reason == "length" and "truncated" not in p.findings
    cut = parse_exchange(record(tool_and_text_stream("")))
    assert cut.finish_reason is None
    assert "no_done" in cut.findings and "truncated" in cut.findings and "no_usage" in cut.findings
    assert (cut.timing.output_tokens, cut.timing.tokens_source) == (5, "counted")
    failed = response_obj("failed", [], None) | {"error": {"code": "server_error", "message": "boom"}}
    f = parse_exchange(
        record(
            [
                event("response.created", 0, response=response_obj("in_progress", [])),
                event("response.failed", 1, response=failed),
            ]
        )
    )
    assert f.error == "boom" and "error_event" in f.findings and "truncated" not in f.findings
    e = parse_exchange(record([event("error", 0, code="rate_limit", message="slow down")]))
    assert e.error == "slow down" and "error_event" in e.findings


def test_refusal_and_unknown_events_are_kept_and_counted() -> None:
    chunks = [
        event("response.refusal.delta", 0, output_index=0, content_index=0, delta="I can't "),
        event("response.refusal.delta", 1, output_index=0, content_index=0, delta="help."),
        event("response.audio.transcript.delta", 2, delta="spoken"),
        event("response.web_search_call.searching", 3, output_index=1),
        event("response.web_search_call.searching", 4, output_index=1),
        event("response.completed", 5, response=response_obj("completed", [], USAGE)),
    ]
    p = parse_exchange(record(chunks))
    assert p.refusal == "I can't help." and p.content == ""
    assert p.unknown_events == {"response.audio.transcript.delta": 1, "response.web_search_call.searching": 2}
    # Output of any kind is a token event: the audio transcript delta too.
    assert p.timing.n_events == 3 and p.finish_reason == "stop"


def test_arguments_and_text_from_done_events_when_no_delta_came() -> None:
    call = {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "f", "arguments": '{"a": 1}'}
    chunks = [
        event("response.output_item.done", 0, output_index=0, item=call),
        event("response.output_text.done", 1, output_index=1, content_index=0, text="hi"),
        event("response.completed", 2, response=response_obj("completed", [call], USAGE)),
    ]
    p = parse_exchange(record(chunks))
    assert [(c.name, c.parsed_arguments) for c in p.tool_calls] == [("f", {"a": 1})]
    assert p.content == "hi" and p.timing.ttft_us is None


def test_only_a_final_response_object_still_gives_the_answer() -> None:
    out = [{"type": "message", "content": [{"type": "output_text", "text": "hello"}]}]
    p = parse_exchange(record([event("response.completed", 0, response=response_obj("completed", out, USAGE))]))
    assert p.content == "hello" and p.finish_reason == "stop"


def test_non_streamed_response_object() -> None:
    output = [
        {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "plan"}]},
        {
            "type": "message",
            "content": [{"type": "output_text", "text": "Done."}, {"type": "refusal", "refusal": "no"}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"x": "y"}'},
        {"type": "web_search_call", "id": "ws", "status": "completed"},
    ]
    p = parse_exchange(record([json.dumps(response_obj("completed", output, USAGE)).encode()], streamed=False))
    assert (p.content, p.reasoning, p.refusal) == ("Done.", "plan", "no")
    assert [(c.id, c.name, c.parsed_arguments) for c in p.tool_calls] == [("call_1", "f", {"x": "y"})]
    assert p.finish_reason == "tool_calls" and p.timing.e2el_us == 1000
    assert (p.timing.output_tokens, p.timing.tokens_source) == (7, "usage")
    cut = parse_exchange(
        record([json.dumps(response_obj("completed", output, USAGE)).encode()], streamed=False), max_tokens=2
    )
    assert cut.finish_reason == "length" and "budget_max_tokens" in cut.findings
    err = parse_exchange(
        record([b'{"error": {"message": "bad model", "type": "invalid_request_error"}}'], streamed=False, status=404)
    )
    assert err.error == "bad model" and "http_error" in err.findings


def test_max_tokens_budget_cuts_the_event_stream() -> None:
    p = parse_exchange(record(tool_and_text_stream()), max_tokens=2)
    assert p.reasoning == "Think." and p.content == "It is " and p.tool_calls == []
    assert p.finish_reason == "length" and "budget_max_tokens" in p.findings and "truncated" not in p.findings
    assert (p.timing.output_tokens, p.timing.tokens_source) == (2, "counted")


def test_embeddings_and_legacy_completions_and_unknown_paths() -> None:
    body = {
        "object": "list",
        "data": [{"embedding": [0.1, 0.2], "index": 0}],
        "model": "emb",
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }
    e = parse_exchange(record([json.dumps(body).encode()], streamed=False, path="/v1/embeddings"))
    assert e.endpoint == "embeddings" and e.model == "emb" and e.usage == body["usage"]
    assert e.timing.e2el_us == 1000 and e.timing.ttft_us is None and e.findings == []
    legacy = [
        b'data: {"choices": [{"index": 0, "text": "Hel", "finish_reason": null}], "model": "c"}\n\n',
        b'data: {"choices": [{"index": 0, "text": "lo", "finish_reason": "stop"}], "model": "c"}\n\n',
        b"data: [DONE]\n\n",
    ]
    c = parse_exchange(record(legacy, path="/openai/v1/completions"))
    assert c.endpoint == "completions" and c.content == "Hello" and c.finish_reason == "stop"
    assert c.timing.ttft_us == 1000 and c.timing.e2el_us == 2000
    other = parse_exchange(record([b'{"object": "list", "data": []}'], streamed=False, path="/v1/models?x=1"))
    assert other.endpoint == "/v1/models" and other.findings == []


def test_parser_version_was_bumped_for_the_endpoint_dispatch() -> None:
    assert PARSER_VERSION >= 2


def _answer(p: ParsedExchange) -> tuple[Any, ...]:
    return (
        p.content,
        p.reasoning,
        p.refusal,
        [(c.id, c.name, c.arguments) for c in p.tool_calls],
        p.finish_reason,
        p.usage,
        p.model,
        sorted(p.findings),
        p.unknown_events,
        p.timing.n_events,
        p.timing.output_tokens,
    )


@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=16), crlf=st.booleans())
def test_any_split_of_the_stream_into_reads_gives_the_same_answer(cuts: list[int], crlf: bool) -> None:
    data = b"".join(tool_and_text_stream())
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    reads = [data[a:b] for a, b in pairwise(bounds) if b > a]
    whole = parse_exchange(record([data]))
    split = parse_exchange(record(reads))
    assert _answer(split) == _answer(whole)
    assert split.content == "It is sunny." and split.tool_calls[0].parsed_arguments == {"city": "Paris"}


_EVENT_TYPES = st.sampled_from(
    [
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.output_text.done",
        "response.refusal.done",
        "response.completed",
        "response.failed",
        "response.incomplete",
        "error",
        "response.custom.delta",
        "x",
    ]
)
_KEYS = st.sampled_from(["type", "name", "arguments", "call_id", "id", "output", "content", "text", "status", "usage"])
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "a", "function_call", "message", "{}"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=6,
)
_FIELD = st.sampled_from(
    ["delta", "text", "arguments", "output_index", "item_id", "item", "response", "message", "code", "type"]
)


@settings(max_examples=200)
@given(events=st.lists(st.tuples(_EVENT_TYPES, st.dictionaries(_FIELD, _JSONISH, max_size=3)), max_size=6))
def test_events_of_any_shape_never_raise(events: list[tuple[str, dict[str, Any]]]) -> None:
    chunks = [b"data: " + json.dumps({"type": kind, **fields}).encode() + b"\n\n" for kind, fields in events]
    p = parse_exchange(record(chunks), max_tokens=3)
    assert isinstance(p.content, str)
    body = json.dumps(dict(events[0][1]) if events else {}).encode()
    assert isinstance(parse_exchange(record([body], streamed=False)).content, str)


@given(reads=st.lists(st.binary(max_size=64), max_size=8), streamed=st.booleans())
def test_arbitrary_bytes_never_raise(reads: list[bytes], streamed: bool) -> None:
    for path in ("/v1/responses", "/v1/embeddings", "/v1/completions", "/v9/unknown"):
        p = parse_exchange(record(reads, streamed=streamed, path=path), max_tokens=2)
        assert isinstance(p.findings, list)
