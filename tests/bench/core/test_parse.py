from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bench.core.cassette.records import Exchange
from bench.core.endpoints import CHAT, RESPONSES
from bench.core.parse import parse_exchange, parse_stream
from tests.support.records import exchange


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> bytes:
    obj: dict[str, Any] = {"id": "c1", "object": "chat.completion.chunk", "model": "m-served", **top}
    if delta is not None or finish is not None:
        obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    else:
        obj.setdefault("choices", [])
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def stream_record(chunks: list[bytes], gaps: list[int] | None = None, **extra: Any) -> Exchange:
    return exchange(
        {
            "id": "x1",
            "request": {"method": "POST", "path": "/v1/chat/completions", "body": b'{"model":"m"}'},
            "response": {
                "status": 200,
                "streamed": True,
                "chunks": chunks,
                "chunk_us": gaps or [1000] * len(chunks),
            },
            "outcome": "complete",
            **extra,
        }
    )


TOOL_STREAM = [
    chunk({"role": "assistant", "content": ""}, system_fingerprint="fp_1"),
    chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "get_time", "arguments": "{}"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
    chunk(finish="tool_calls"),
    chunk(usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
    b"data: [DONE]\n\n",
]


def test_tool_calls_are_assembled_by_index() -> None:
    p = parse_exchange(stream_record(TOOL_STREAM))
    assert [(c.index, c.id, c.name, c.parsed_arguments) for c in p.tool_calls] == [
        (0, "call_a", "get_weather", {"city": "Paris"}),
        (1, "call_b", "get_time", {}),
    ]
    assert p.finish_reason == "tool_calls"
    assert p.system_fingerprint == "fp_1" and p.model == "m-served"
    assert p.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert p.findings == []


def test_vllm_timing_definitions() -> None:
    # reads at 1000, 3000, 6000, ... µs after the request; usage chunk and [DONE] do not count as token events
    gaps = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]
    p = parse_exchange(stream_record(TOOL_STREAM, gaps))
    t = p.timing
    assert t.ttft_us == 1000  # the role-only first chunk counts, as in vLLM
    assert t.e2el_us == 21000  # the finish_reason chunk is the last with choices
    assert t.itl_us == [2000, 3000, 4000, 5000, 6000]
    assert t.output_tokens == 5 and t.tokens_source == "usage"
    assert t.tpot_us == (21000 - 1000) / 4


def test_findings_for_a_cut_stream_with_bad_arguments_and_no_usage() -> None:
    chunks = [
        chunk({"role": "assistant"}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a": '}}]}),
    ]
    p = parse_exchange(stream_record([*chunks, b'data: {"choi']))
    assert {"no_done", "truncated", "invalid_tool_json", "no_usage"} <= set(p.findings)
    assert p.tool_calls[0].valid_json is False
    assert p.timing.tokens_source == "counted"


def test_text_tool_call_and_error_event() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    p = parse_exchange(stream_record([chunk({"content": text}, finish="stop"), b"data: [DONE]\n\n"]))
    assert "text_tool_call" in p.findings and not p.tool_calls
    err = parse_exchange(stream_record([b'data: {"error": {"message": "overloaded"}}\n\n']))
    assert "error_event" in err.findings and err.error == "overloaded"


def test_non_streamed_body() -> None:
    body = {
        "model": "m2",
        "system_fingerprint": "fp_9",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}],
                },
            }
        ],
        "usage": {"completion_tokens": 9},
    }
    raw = json.dumps(body).encode()
    rec = exchange(response={"status": 200, "streamed": False, "chunks": [raw[:10], raw[10:]], "chunk_us": [500, 700]})
    p = parse_exchange(rec)
    assert p.tool_calls[0].parsed_arguments == {"x": 1} and p.content == ""
    assert p.timing.e2el_us == 1200 and p.timing.output_tokens == 9
    err = parse_exchange(exchange(response={"status": 429, "chunks": [b'{"error":{"message":"slow down"}}']}))
    assert err.findings == ["http_error"] and err.error == "slow down"


def test_budgets_cut_as_if_generation_or_the_client_stopped() -> None:
    words = [chunk({"content": f"w{i} "}) for i in range(10)]
    chunks = [chunk({"role": "assistant"}), *words, chunk(finish="stop"), b"data: [DONE]\n\n"]
    full = parse_exchange(stream_record(chunks))
    assert full.content.split() == [f"w{i}" for i in range(10)]
    short = parse_exchange(stream_record(chunks), max_tokens=3)
    assert short.content.split() == ["w0", "w1", "w2"]
    assert short.finish_reason == "length" and "budget_max_tokens" in short.findings
    assert "truncated" not in short.findings
    late = parse_exchange(stream_record(chunks, [1000] * len(chunks)), deadline_us=4500)
    assert late.content.split() == ["w0", "w1", "w2"]
    assert late.outcome == "timeout" and "budget_deadline" in late.findings


@given(cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_read_boundaries_never_change_the_answer(cuts: list[int]) -> None:
    raw = b"".join(TOOL_STREAM)
    bounds = sorted({c for c in cuts if c <= len(raw)} | {0, len(raw)})
    chunks = [raw[a:b] for a, b in pairwise(bounds)]
    p = parse_exchange(stream_record(chunks))
    whole = parse_exchange(stream_record([raw]))
    assert [(c.name, c.arguments) for c in p.tool_calls] == [(c.name, c.arguments) for c in whole.tool_calls]
    assert p.findings == whole.findings and p.finish_reason == whole.finish_reason


def test_llama_cpp_style_duplicate_function_call_and_repeated_names() -> None:
    def frag(args: str) -> bytes:
        fc = {"name": "get_weather", "arguments": args}
        tc = [{"index": 0, "id": "call_0", "type": "function", "function": fc}]
        return chunk({"role": None, "content": None, "function_call": fc, "tool_calls": tc})

    chunks = [frag("{"), frag(' "city"'), frag(': "Paris"}'), chunk(finish="tool_calls"), b"data: [DONE]\n\n"]
    p = parse_exchange(stream_record(chunks))
    assert [(c.name, c.parsed_arguments) for c in p.tool_calls] == [("get_weather", {"city": "Paris"})]


def test_a_bad_event_costs_only_itself_and_invalid_utf8_reads_as_a_client_would() -> None:
    chunks = [
        chunk({"role": "assistant"}),
        chunk({"content": "a"}),
        b"data: {not json\n\n",
        b'data: 1,{"x": 2}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"content":"b\xff"}}]}\n\n',
        chunk({"content": "c"}, finish="stop"),
        b"data: [DONE]\n\n",
    ]
    p = parse_exchange(stream_record(chunks))
    assert p.content == "ab\ufffdc"
    assert "bad_event_json" in p.findings
    assert p.finish_reason == "stop" and "truncated" not in p.findings


def test_chunks_of_the_wrong_shape_are_bad_events_not_crashes() -> None:
    chunks = [
        chunk({"content": "a"}),
        b'data: {"choices": "not a list"}\n\n',
        b'data: {"choices": [{"index": 0, "delta": {"content": 5}}]}\n\n',
        chunk({"content": "b", "reasoning": {"summary": "an object, not text"}}, finish="stop"),
        b"data: [DONE]\n\n",
    ]
    p = parse_exchange(stream_record(chunks))
    assert p.content == "ab" and p.reasoning == ""
    assert "bad_event_json" in p.findings
    assert p.timing.n_events == 2


def test_the_recording_proxys_loop_lag_is_carried_when_recorded() -> None:
    assert parse_exchange(stream_record(TOOL_STREAM, timing={"loop_lag_us": 1234})).timing.loop_lag_us == 1234
    assert parse_exchange(stream_record(TOOL_STREAM, timing={"end": 5})).timing.loop_lag_us is None
    assert parse_exchange(stream_record(TOOL_STREAM)).timing.loop_lag_us is None


def test_kept_events_are_the_plain_json_chunks() -> None:
    p = parse_exchange(stream_record(TOOL_STREAM), keep_events=True)
    assert len(p.events) == 7 and p.events[0][1]["system_fingerprint"] == "fp_1"
    assert parse_exchange(stream_record(TOOL_STREAM)).events == []


_FRAGMENT = st.fixed_dictionaries(
    {},
    optional={
        "index": st.integers(min_value=0, max_value=1),
        "id": st.sampled_from(["call_a", "call_b"]),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {}, optional={"name": st.sampled_from(["f", "g"]), "arguments": st.sampled_from(["", "{", '"a"', "}"])}
        ),
    },
)
_DELTA = st.one_of(
    st.fixed_dictionaries({"content": st.sampled_from(["", "x", "yz"])}),
    st.fixed_dictionaries({"tool_calls": st.lists(_FRAGMENT, min_size=1, max_size=2)}),
    # The common case the parser takes inline: a bare argument fragment of the call being streamed.
    st.fixed_dictionaries(
        {
            "tool_calls": st.tuples(
                st.fixed_dictionaries(
                    {
                        "index": st.integers(0, 1),
                        "function": st.fixed_dictionaries({"arguments": st.sampled_from(["a", "b"])}),
                    }
                )
            )
        }
    ),
    st.fixed_dictionaries({"function_call": st.fixed_dictionaries({"name": st.just("f"), "arguments": st.just("z")})}),
    st.fixed_dictionaries({"reasoning_content": st.sampled_from(["r", ""]), "content": st.sampled_from(["", "c"])}),
)


def _assemble(deltas: list[dict[str, Any]]) -> tuple[str, str, list[tuple[Any, ...]], int]:
    """What an OpenAI client builds from these deltas, written plainly: fragments joined by index, a repeated name
    not doubled, a legacy function_call only when no tool_calls came with it; and how many events produced output."""
    content, reasoning, counted = "", "", 0
    calls: dict[int, dict[str, Any]] = {}

    def add(call: dict[str, Any], fn: dict[str, Any]) -> None:
        if fn.get("name") and fn["name"] != call["name"]:
            call["name"] += fn["name"]
        call["arguments"] += fn.get("arguments") or ""

    for d in deltas:
        produced = bool(d.get("content"))
        content += d.get("content") or ""
        if d.get("reasoning_content"):
            reasoning += d["reasoning_content"]
            produced = True
        for pos, frag in enumerate(d.get("tool_calls") or []):
            produced = True
            call = calls.setdefault(
                frag.get("index", pos), {"id": None, "name": "", "arguments": "", "type": "function"}
            )
            call["id"] = frag.get("id") or call["id"]
            call["type"] = frag.get("type") or call["type"]
            add(call, frag.get("function") or {})
        if "function_call" in d and not d.get("tool_calls"):
            produced = True
            add(calls.setdefault(0, {"id": None, "name": "", "arguments": "", "type": "function"}), d["function_call"])
        counted += produced
    assembled = [(i, c["id"], c["name"], c["arguments"], c["type"]) for i, c in sorted(calls.items())]
    return content, reasoning, assembled, counted


@given(deltas=st.lists(_DELTA, max_size=12))
def test_any_sequence_of_deltas_assembles_as_a_client_would(deltas: list[dict[str, Any]]) -> None:
    p = parse_exchange(stream_record([*map(chunk, deltas), chunk(finish="stop"), b"data: [DONE]\n\n"]))
    content, reasoning, calls, counted = _assemble(deltas)
    assert (p.content, p.reasoning) == (content, reasoning)
    assert [(c.index, c.id, c.name, c.arguments, c.type) for c in p.tool_calls] == calls
    assert (p.timing.output_tokens, p.timing.tokens_source) == (counted, "counted")


def test_a_call_with_empty_arguments_has_the_empty_object() -> None:
    # Streamed: a name and no arguments at all, or only whitespace; whole answers: an empty string.
    for fragments in ([], [" "], ["", "  \n"]):
        parts = [chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "now"}}]})]
        parts += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in fragments]
        p = parse_exchange(stream_record([*parts, chunk(finish="tool_calls"), b"data: [DONE]\n\n"]))
        assert [(c.name, c.parsed_arguments, c.valid_json) for c in p.tool_calls] == [("now", {}, True)], fragments
        assert "invalid_tool_json" not in p.findings
    message = {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "now", "arguments": ""}}]}
    body = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()
    p = parse_exchange(exchange(response={"status": 200, "streamed": False, "chunks": [body], "chunk_us": [5]}))
    assert [(c.parsed_arguments, c.valid_json) for c in p.tool_calls] == [({}, True)] and p.findings == []


def test_a_tool_call_written_as_text_is_found_anywhere_in_the_answer() -> None:
    calls = [
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
        '<function=get_weather>{"city": "Paris"}</function>',
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{ "function" : "get_weather", "parameters": {"city": "Paris"}}',
    ]
    for call in calls:
        for text in (call, f"Let me check the weather for you.\n\n{call}", f"Sure! {call} Done."):
            p = parse_exchange(stream_record([chunk({"content": text}, finish="stop"), b"data: [DONE]\n\n"]))
            assert "text_tool_call" in p.findings, text
    for prose in ("The function get_weather takes a city.", '{"name": "Paris"}', "I would call <tool> here"):
        p = parse_exchange(stream_record([chunk({"content": prose}, finish="stop"), b"data: [DONE]\n\n"]))
        assert "text_tool_call" not in p.findings, prose


# Tests written for mutation testing's survivors (docs/measurements/2026-12-mutation.md): each pins what a caller sees.


def body_record(body: bytes, status: int | None = 200) -> Exchange:
    return exchange(response={"status": status, "streamed": False, "chunks": [body], "chunk_us": [700]})


def test_timing_holds_every_figure_the_scores_file_writes() -> None:
    t = parse_exchange(stream_record(TOOL_STREAM, [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000])).timing
    assert (t.ttft_us, t.e2el_us, t.tpot_us, t.itl_us) == (1000, 21000, 5000.0, [2000, 3000, 4000, 5000, 6000])
    assert (t.output_tokens, t.tokens_source, t.n_events, t.loop_lag_us) == (5, "usage", 6, None)
    assert (t.started_us, t.end_us) == (None, None)  # a record without them: not invented


def test_an_exchanges_wall_clock_start_and_end_are_kept_for_task_times() -> None:
    record = stream_record(TOOL_STREAM, [1000] * 8, started=1_700_000_000_000_000, timing={"end": 9_500})
    t = parse_exchange(record).timing
    assert (t.started_us, t.end_us) == (1_700_000_000_000_000, 9_500)


def test_a_whole_body_that_is_not_json_is_a_finding_only_when_the_status_says_success() -> None:
    assert parse_exchange(body_record(b"<html>oops</html>")).findings == ["bad_body_json"]
    # An error status's page is not expected to be JSON; an exchange with no status (cut before one) is not either.
    for status, findings in ((400, ["http_error"]), (399, ["bad_body_json"]), (None, [])):
        p = parse_exchange(body_record(b"<html>oops</html>", status))
        assert p.findings == findings, status
        assert (p.content, p.error, p.timing.e2el_us) == ("", None, 700)


def test_a_whole_bodys_error_is_its_message_or_the_error_as_it_came() -> None:
    for error, text in (
        ({"message": "slow down", "type": "rate_limit"}, "slow down"),
        ("plain text", "plain text"),
        ({"code": 5}, "{'code': 5}"),
    ):
        p = parse_exchange(body_record(json.dumps({"error": error}).encode(), 429))
        assert p.error == text, error


def test_a_whole_bodys_model_fingerprint_usage_and_reasoning_are_kept() -> None:
    body = {
        "model": "m2",
        "system_fingerprint": "fp_9",
        "usage": {"completion_tokens": 3},
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "hi", "reasoning": "think"}}],
    }
    p = parse_exchange(body_record(json.dumps(body).encode()))
    assert (p.model, p.system_fingerprint, p.usage, p.reasoning, p.content) == (
        "m2",
        "fp_9",
        {"completion_tokens": 3},
        "think",
        "hi",
    )


def test_streamed_arguments_sent_as_an_object_are_its_json_text() -> None:
    # Some servers send the arguments object itself instead of a string of JSON text.
    fn = {"name": "get_weather", "arguments": {"city": "Paris"}}
    chunks = [chunk({"tool_calls": [{"index": 0, "id": "c", "function": fn}]}), chunk(finish="tool_calls")]
    p = parse_exchange(stream_record([*chunks, b"data: [DONE]\n\n"]))
    assert [(c.arguments, c.parsed_arguments, c.valid_json) for c in p.tool_calls] == [
        ('{"city":"Paris"}', {"city": "Paris"}, True)
    ]


def test_kept_events_are_json_objects_only() -> None:
    chunks = [b"data: [1, 2]\n\n", b'data: "text"\n\n', b"data: 7\n\n", chunk({"content": "a"}, finish="stop")]
    p = parse_exchange(stream_record([*chunks, b"data: [DONE]\n\n"]), keep_events=True)
    assert [obj["choices"][0]["delta"] for _t, obj in p.events] == [{"content": "a"}]
    assert [t for t, _obj in p.events] == [4000]


def test_a_budget_the_answer_does_not_reach_changes_nothing() -> None:
    # The last token's event ends the answer (no finish-only event after it) and [DONE] follows: a budget equal to
    # the answer's length, or above it, cuts nothing.
    chunks = [chunk({"content": "a"}), chunk({"content": "b"}), chunk({"content": "c"}, finish="stop")]
    for max_tokens in (3, 4, 100):
        p = parse_exchange(stream_record([*chunks, b"data: [DONE]\n\n"]), max_tokens=max_tokens)
        assert (p.content, p.finish_reason, p.findings) == ("abc", "stop", ["no_usage"]), max_tokens
    cut = parse_exchange(stream_record([*chunks, b"data: [DONE]\n\n"]), max_tokens=2)
    assert (cut.content, cut.finish_reason) == ("ab", "length")
    assert cut.findings == ["budget_max_tokens", "no_usage"]
    # A stream cut before [DONE] under a budget it never reached is still reported cut.
    p = parse_exchange(stream_record(chunks[:2]), max_tokens=5)
    assert p.findings == ["no_done", "truncated", "no_usage"]


def test_a_budget_counts_reasoning_and_tool_call_events_and_passes_over_events_with_no_delta() -> None:
    chunks = [
        b"data: {not json\n\n",
        chunk(usage={"prompt_tokens": 1}),
        chunk({"reasoning_content": "r1"}),
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
        chunk({"content": "x"}),
        chunk({"content": "y"}, finish="stop"),
        b"data: [DONE]\n\n",
    ]
    p = parse_exchange(stream_record(chunks), max_tokens=3)
    assert (p.reasoning, [c.name for c in p.tool_calls], p.content) == ("r1", ["f"], "x")
    assert p.finish_reason == "length" and "budget_max_tokens" in p.findings
    p = parse_exchange(stream_record(chunks), max_tokens=2)
    assert (p.reasoning, [c.name for c in p.tool_calls], p.content) == ("r1", ["f"], "")


def test_a_live_stream_is_parsed_with_its_absolute_read_times() -> None:
    # The driver's parse: read times are already absolute (microseconds since the request), not gaps.
    p = parse_stream(TOOL_STREAM, [10, 20, 30, 40, 50, 60, 70, 80])
    assert (p.status, p.streamed, p.endpoint, p.outcome, p.findings, p.events) == (200, True, CHAT, "complete", [], [])
    assert (p.timing.ttft_us, p.timing.e2el_us, p.timing.itl_us) == (10, 60, [10, 10, 10, 10, 10])
    assert [(c.name, c.parsed_arguments) for c in p.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {}),
    ]
    kept = parse_stream(TOOL_STREAM[:2], [5, 6], keep_events=True)
    assert [t for t, _obj in kept.events] == [5, 6] and kept.findings == ["no_done", "truncated", "no_usage"]
    # The Responses API's events, by their endpoint.
    created = {"type": "response.created", "sequence_number": 0, "response": {"status": "in_progress", "output": []}}
    delta = {"type": "response.output_text.delta", "sequence_number": 1, "output_index": 0, "delta": "hi"}
    raw = [b"event: x\ndata: " + json.dumps(e).encode() + b"\n\n" for e in (created, delta)]
    responses = parse_stream(raw, [7, 9], endpoint=RESPONSES)
    assert (responses.endpoint, responses.content, responses.timing.ttft_us) == (RESPONSES, "hi", 9)
    assert parse_stream(raw, [7, 9]).content == ""  # read as chat chunks, these events carry no choices


def whole(doc: Any, status: int | None = 200) -> Any:
    return parse_exchange(body_record(json.dumps(doc).encode(), status))


def test_a_whole_body_is_read_from_the_choice_with_index_0() -> None:
    second = {"index": 1, "finish_reason": "length", "message": {"content": "second", "reasoning": "r1"}}
    first = {"index": 0, "finish_reason": "stop", "message": {"content": "first", "reasoning_content": "rc"}}
    p = whole({"choices": [second, first]})
    assert (p.content, p.reasoning, p.finish_reason, p.findings) == ("first", "rc", "stop", [])
    # A choice without an index is the first choice (n = 1, as some servers write it).
    p = whole({"choices": [{"finish_reason": "stop", "message": {"content": "only", "reasoning": "r"}}]})
    assert (p.content, p.reasoning, p.finish_reason) == ("only", "r", "stop")
    # Only other choices: no answer to score.
    p = whole({"choices": [second]})
    assert (p.content, p.finish_reason, p.findings) == ("", None, ["empty_choices"])


def test_a_legacy_completion_body_is_its_text() -> None:
    p = whole({"choices": [{"index": 0, "text": "done", "finish_reason": "stop"}]})
    assert (p.content, p.finish_reason, p.tool_calls) == ("done", "stop", [])
    p = whole({"choices": [{"index": 0, "text": None, "finish_reason": "length"}]})
    assert (p.content, p.finish_reason) == ("", "length")


def test_a_whole_bodys_tool_calls_keep_their_order_ids_types_names_and_arguments() -> None:
    calls = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
        {"function": {"name": "g"}},
        {"id": "c", "type": "custom"},
        {"id": "d", "function": {"name": "h", "arguments": '{"y": 2}'}},
    ]
    p = whole({"choices": [{"index": 0, "message": {"content": None, "tool_calls": calls}}]})
    assert [(c.index, c.id, c.name, c.arguments, c.type, c.parsed_arguments, c.valid_json) for c in p.tool_calls] == [
        (0, "a", "f", '{"x":1}', "function", {"x": 1}, True),
        (1, None, "g", "", "function", {}, True),
        (2, "c", "", "", "custom", {}, True),
        (3, "d", "h", '{"y": 2}', "function", {"y": 2}, True),
    ]
    assert p.findings == []


def test_a_whole_body_without_choices_or_not_an_object() -> None:
    assert whole({"choices": []}).findings == ["empty_choices"]
    assert whole({"choices": None}).findings == ["empty_choices"]
    assert whole({"choices": []}, 500).findings == ["http_error"]
    assert whole({"choices": []}, 400).findings == ["http_error"]
    assert whole({"choices": [{"index": 0, "message": {"content": "a"}}]}).reasoning == ""
    assert whole({"choices": []}, None).findings == []
    embedding = whole({"object": "list", "data": [], "model": "e", "usage": {"prompt_tokens": 2}})
    assert (embedding.findings, embedding.model, embedding.usage) == ([], "e", {"prompt_tokens": 2})
    for doc in ([1, 2], "text", 5):
        p = whole(doc)
        assert (p.findings, p.content, p.model, p.error, p.timing.e2el_us) == ([], "", None, None, 700), doc
    # An empty usage object is no usage.
    assert whole({"choices": [{"index": 0, "message": {"content": "a"}}], "usage": {}}).usage is None


def test_error_events_are_one_finding_and_the_last_ones_text() -> None:
    one = parse_exchange(stream_record([b'data: {"error": {"code": 1}}\n\n']))
    assert (one.findings.count("error_event"), one.error) == (1, "{'code': 1}")
    two = parse_exchange(stream_record([b'data: {"error": {"code": 1}}\n\n', b'data: {"error": "gone"}\n\n']))
    assert (two.findings.count("error_event"), two.error) == (1, "gone")


def tc(index: int, **fields: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, **fields}]}


# Delta sequences that take each branch of the per-event loop's inline path for argument fragments (and each way out
# of it), checked against the plain reference `_assemble`; hypothesis samples such sequences, these are always run.
INLINE_CASES: list[list[dict[str, Any]]] = [
    # fragments joined inline, then flushed by a fragment of another call
    [
        tc(0, id="a", function={"name": "f"}),
        tc(0, function={"arguments": "x"}),
        tc(0, function={"arguments": "y"}),
        tc(1, id="b", function={"name": "g"}),
        tc(0, function={"arguments": "z"}),
    ],
    # two fragments in one delta after a call is being streamed
    [
        tc(0, id="a", function={"name": "f", "arguments": "{"}),
        {
            "tool_calls": [
                {"index": 0, "function": {"arguments": "x"}},
                {"index": 1, "id": "b", "function": {"name": "g"}},
            ]
        },
        tc(0, function={"arguments": "}"}),
    ],
    # a name sent in pieces, an id, a type, a fragment without a function, for the call being streamed
    [tc(0, id="a", function={"name": "get_"}), tc(0, function={"name": "weather", "arguments": "{}"})],
    [tc(0, function={"name": "f", "arguments": "a"}), tc(0, id="late", function={"arguments": "b"})],
    [tc(0, function={"name": "f"}), tc(0, type="custom", function={"arguments": "b"})],
    [tc(0, function={"name": "f", "arguments": "a"}), tc(0, id="x"), tc(0, function={"arguments": "b"})],
    [tc(0, function={"name": "f", "arguments": "a"}), tc(0), tc(0, function={"arguments": "b"})],
    # reasoning that comes with a fragment is kept
    [tc(0, function={"name": "f", "arguments": "a"}), {"reasoning_content": "r", **tc(0, function={"arguments": "b"})}],
    # text with a fragment, and text between fragments
    [
        tc(0, function={"name": "f", "arguments": "a"}),
        {"content": "t", **tc(0, function={"arguments": "b"})},
        {"content": "u"},
        tc(0, function={"arguments": "c"}),
    ],
]


def test_each_branch_of_the_inline_fragment_path_assembles_as_a_client_would() -> None:
    for deltas in INLINE_CASES:
        p = parse_exchange(stream_record([*map(chunk, deltas), chunk(finish="stop"), b"data: [DONE]\n\n"]))
        content, reasoning, calls, counted = _assemble(deltas)
        assert (p.content, p.reasoning) == (content, reasoning), deltas
        assert [(c.index, c.id, c.name, c.arguments, c.type) for c in p.tool_calls] == calls, deltas
        assert (p.timing.output_tokens, p.timing.n_events) == (counted, len(deltas) + 1), deltas


def test_an_object_fragment_after_string_fragments_is_appended_as_json_text() -> None:
    deltas = [tc(0, id="a", function={"name": "f", "arguments": "["}), tc(0, function={"arguments": {"k": 1}})]
    p = parse_exchange(stream_record([*map(chunk, deltas), chunk(finish="stop"), b"data: [DONE]\n\n"]))
    assert [c.arguments for c in p.tool_calls] == ['[{"k":1}']


def test_with_several_choices_the_one_with_index_0_is_the_answer() -> None:
    def both(a: str, b: str) -> bytes:
        choices = [{"index": 1, "delta": {"content": b}}, {"index": 0, "delta": {"content": a}}]
        return b"data: " + json.dumps({"choices": choices}).encode() + b"\n\n"

    only_1 = b'data: {"choices": [{"index": 1, "delta": {"content": "Z"}, "finish_reason": "length"}]}\n\n'
    p = parse_exchange(
        stream_record([both("A", "B"), only_1, both("C", "D"), chunk(finish="stop"), b"data: [DONE]\n\n"])
    )
    assert (p.content, p.finish_reason, p.timing.output_tokens) == ("AC", "stop", 2)


def test_done_markers_anywhere_and_events_without_choices_cost_nothing() -> None:
    a, b = chunk({"content": "a"}), chunk({"content": "b"}, finish="stop")
    usage = chunk(usage={"completion_tokens": 2})
    for chunks in (
        [a, b"data: [DONE]\n\n", b, b"data: [DONE]\n\n"],
        [a, b, b"data: [DONE]\n\n", usage],
        [a, b"data: [DONE]\n\n", b, usage],
        [a, b'data: {"choices": []}\n\n', b"data: {}\n\n", b, b"data: [DONE]\n\n"],
    ):
        p = parse_exchange(stream_record(chunks), keep_events=True)
        assert (p.content, p.finish_reason) == ("ab", "stop"), chunks
        assert "bad_event_json" not in p.findings and "no_done" not in p.findings, chunks
        # Kept: every event that is a JSON object with something in it.
        assert len(p.events) == sum(c not in (b"data: [DONE]\n\n", b"data: {}\n\n") for c in chunks), chunks


def test_a_legacy_completions_stream_counts_each_text_event() -> None:
    def text(t: str, finish: str | None = None) -> bytes:
        return (
            b"data: " + json.dumps({"choices": [{"index": 0, "text": t, "finish_reason": finish}]}).encode() + b"\n\n"
        )

    p = parse_exchange(stream_record([text("a"), text(""), text("b"), text("c", "stop"), b"data: [DONE]\n\n"]))
    assert (p.content, p.finish_reason, p.timing.output_tokens, p.timing.tokens_source) == ("abc", "stop", 3, "counted")


def test_the_model_is_read_past_bad_events_and_findings_of_a_stream_with_no_answer() -> None:
    p = parse_exchange(stream_record([b"data: {oops\n\n", chunk({"content": "a"}, finish="stop"), b"data: [DONE]\n\n"]))
    assert (p.model, p.content) == ("m-served", "a")
    # [DONE] and no finish_reason: complete for the transport, but the server cut the answer (said in reports).
    findings = parse_exchange(stream_record([chunk({"content": "a"}), b"data: [DONE]\n\n"])).findings
    assert findings == ["no_usage", "no_finish_reason"]
    assert parse_exchange(stream_record([b"data: [DONE]\n\n"])).findings == ["empty_choices"]
    for status, findings in ((400, ["http_error"]), (399, ["empty_choices"])):
        record = stream_record([b"data: [DONE]\n\n"])
        record.response.status = status
        assert parse_exchange(record).findings == findings, status


def test_budgets_take_output_tokens_from_counting_not_usage() -> None:
    # Usage arrives with the first event (as with continuous usage stats), so it is known when the budget cuts.
    words = [chunk({"content": f"w{i} "}, usage={"completion_tokens": 4} if i == 0 else None) for i in range(4)]
    chunks = [*words, chunk(finish="stop"), chunk(usage={"completion_tokens": 4}), b"data: [DONE]\n\n"]
    full = parse_exchange(stream_record(chunks))
    assert (full.timing.output_tokens, full.timing.tokens_source) == (4, "usage")
    short = parse_exchange(stream_record(chunks), max_tokens=2)
    assert (short.timing.output_tokens, short.timing.tokens_source) == (2, "counted")
    late = parse_exchange(stream_record(chunks), deadline_us=3500)
    assert (late.timing.output_tokens, late.timing.tokens_source) == (3, "counted")


def test_a_whole_body_past_the_budget_keeps_the_proportional_prefix() -> None:
    doc = {"choices": [{"index": 0, "message": {"content": "abcdefghij" * 2}}], "usage": {"completion_tokens": 10}}
    p = parse_exchange(body_record(json.dumps(doc).encode()), max_tokens=4)
    assert (p.content, p.finish_reason, p.findings) == ("abcdefgh", "length", ["budget_max_tokens"])
    assert (p.timing.output_tokens, p.timing.tokens_source) == (10, "usage")
    two = parse_exchange(
        stream_record([chunk({"content": "a"}), chunk({"content": "b"}), b"data: [DONE]\n\n"], [1000, 3000, 1])
    )
    assert two.timing.tpot_us == 3000.0  # (E2EL - TTFT) / (2 - 1)
    p = parse_exchange(body_record(json.dumps(doc).encode()), max_tokens=10)
    assert (p.content, p.finish_reason, p.findings) == ("abcdefghij" * 2, None, [])


def test_arguments_that_are_not_json_have_no_parsed_value() -> None:
    p = parse_exchange(
        stream_record([chunk(tc(0, id="a", function={"name": "f", "arguments": "{x"})), chunk(finish="stop")])
    )
    assert [(c.parsed_arguments, c.valid_json) for c in p.tool_calls] == [(None, False)]


def test_an_event_holding_two_json_objects_is_a_bad_event_not_two() -> None:
    p = parse_exchange(
        stream_record([chunk({"content": "a"}), b'data: {"choices":[]},{"choices":[]}\n\n', chunk(finish="stop")])
    )
    assert (p.content, p.findings) == ("a", ["bad_event_json", "no_done", "no_usage"])


def test_the_records_id_error_status_and_read_times_are_carried() -> None:
    record = stream_record([chunk({"content": "a"}), chunk({"content": "b"})], outcome="truncated", error="cut")
    record.response.chunk_us = []  # a record without read times: every read at the request's time
    p = parse_exchange(record)
    assert (p.id, p.error, p.outcome, p.timing.ttft_us, p.timing.e2el_us) == ("x1", "cut", "truncated", 0, 0)
    record = stream_record([chunk({"content": "a"}), b"data: [DONE]\n\n"])
    record.response.status = 400
    assert parse_exchange(record).findings[0] == "http_error"


def test_a_deadline_keeps_the_reads_that_arrived_by_it() -> None:
    chunks = [chunk({"content": c}) for c in "abcd"] + [chunk(finish="stop"), b"data: [DONE]\n\n"]
    at = parse_exchange(stream_record(chunks), deadline_us=3000)  # reads at 1000, 2000, 3000, ...
    assert (at.content, at.outcome, "budget_deadline" in at.findings) == ("abc", "timeout", True)
    last = parse_exchange(stream_record(chunks), deadline_us=6000)
    assert (last.content, last.outcome, last.findings) == ("abcd", "complete", ["no_usage"])
    before = parse_exchange(stream_record(chunks), deadline_us=5999)
    assert (before.content, before.finish_reason, before.outcome) == ("abcd", "stop", "timeout")


def test_a_body_that_does_not_decode_is_a_finding() -> None:
    record = stream_record([b"\x1f\x8b\x08\x00garbage, not gzip"])
    record.response.headers = [["Content-Encoding", "gzip"]]
    assert "undecodable_body" in parse_exchange(record).findings


def test_responses_events_are_kept_when_asked() -> None:
    created = {"type": "response.created", "sequence_number": 0, "response": {"status": "in_progress", "output": []}}
    delta = {"type": "response.output_text.delta", "sequence_number": 1, "output_index": 0, "delta": "hi"}
    raw = [b"event: x\ndata: " + json.dumps(e).encode() + b"\n\n" for e in (created, delta)]
    record = stream_record(raw)
    record.request.path = "/v1/responses"
    p = parse_exchange(record, keep_events=True)
    assert (p.content, [obj["type"] for _t, obj in p.events]) == ("hi", [created["type"], delta["type"]])
    assert parse_exchange(record).events == []
