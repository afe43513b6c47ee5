"""A chat stream's run (reads that differ only in the token) is parsed in bulk exactly as event by event: the same
ParsedExchange, every field, on streams built to hold runs and then spoiled in the ways recordings are."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core import parse as parse_module
from bench.core.chunk_runs import ARGUMENTS, CONTENT, REASONING_CONTENT, chat_run
from bench.core.parse import parse_exchange
from bench.core.parsed import ParsedExchange
from tests.bench.core.test_parse import stream_record
from tests.support.obfuscation import KINDS, obfuscate

ENVELOPE = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "system_fingerprint": "f",
}


def chunk(delta: dict[str, Any], finish: str | None = None, ascii_only: bool = True, **top: Any) -> bytes:
    obj = {**ENVELOPE, **top, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=ascii_only).encode() + b"\n\n"


def both(reads: list[bytes], gaps: list[int] | None = None) -> tuple[ParsedExchange, ParsedExchange]:
    """The stream parsed with runs, and event by event (the run finder off)."""
    record = stream_record(reads, gaps)
    with_runs = parse_exchange(record)
    with patch.object(parse_module, "chat_run", lambda reads: None):
        plain = parse_exchange(record)
    return with_runs, plain


def text_stream(tokens: list[str], usage: bool = True) -> list[bytes]:
    counts = {"prompt_tokens": 3, "completion_tokens": len(tokens), "total_tokens": 3 + len(tokens)}
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": t}) for t in tokens),
        chunk({}, "stop"),
        *([b"data: " + json.dumps({**ENVELOPE, "choices": [], "usage": counts}).encode() + b"\n\n"] if usage else []),
        b"data: [DONE]\n\n",
    ]


def call_stream(fragments: list[str], index: int = 0) -> list[bytes]:
    named = {"index": index, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    return [
        chunk({"role": "assistant", "tool_calls": [named]}),
        *(chunk({"tool_calls": [{"index": index, "function": {"arguments": f}}]}) for f in fragments),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


def test_the_run_path_is_taken_for_text_reasoning_and_arguments() -> None:
    # Not vacuous: each kind of stream below does hold a run, whose hole is the field named.
    tokens = [f" w{i}" for i in range(40)]
    text, calls = chat_run(text_stream(tokens)), chat_run(call_stream(tokens))
    thinking = chat_run([chunk({"reasoning_content": t}) for t in tokens])
    assert text is not None and text[2] == CONTENT and text[0].values == tokens
    assert calls is not None and calls[2] == ARGUMENTS
    assert thinking is not None and thinking[2] == REASONING_CONTENT
    for reads in (text_stream(tokens), call_stream(tokens), [chunk({"reasoning_content": t}) for t in tokens]):
        with_runs, plain = both(reads)
        assert with_runs == plain and with_runs.timing.n_events >= 40
    # OpenAI's `obfuscation` (random characters, the last field of every chunk): a paired run, the same fields.
    for reads in (text_stream(tokens), call_stream(tokens)):
        found = chat_run(obfuscate(reads, "escapes", 7))
        assert found is not None and found[0].rest is not None and found[0].values == tokens
        with_runs, plain = both(obfuscate(reads, "escapes", 7))
        assert with_runs == plain and with_runs.timing.n_events >= 40


def test_templates_the_bulk_fold_does_not_cover_give_no_run() -> None:
    tokens = [f" w{i}" for i in range(40)]
    uncovered = [
        [chunk({"content": t}, usage={"total_tokens": 1}) for t in tokens],  # usage in every read
        [chunk({"content": t}, error={"message": "x"}) for t in tokens],  # an error in every read
        [chunk({"content": t, "reasoning": "r"}) for t in tokens],
        [chunk({"content": "c", "reasoning_content": t}) for t in tokens],
        [chunk({"content": t, "reasoning_content": "r"}) for t in tokens],
        [chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": t}}]}) for t in tokens],
        # The string is a key, or another key after it takes the field's value.
        [b"data: " + json.dumps({"choices": [{"delta": {t: 1}}]}).encode() + b"\n\n" for t in tokens],
        [chunk({"content": t, "x": 1}).replace(b',"x":1', b',"content":"z"') for t in tokens],
        # A second string that differs, which the chunk keeps (a later `model`), or a key (an object's).
        [chunk({"content": t}).replace(b"]}\n\n", b'],"model":"m%d"}\n\n' % i) for i, t in enumerate(tokens)],
        [chunk({"content": t}).replace(b"]}\n\n", b'],"x":{"k%d":1}}\n\n' % i) for i, t in enumerate(tokens)],
        # Two choices.
        [
            b"data: "
            + json.dumps({"choices": [{"index": 0, "delta": {"content": t}}, {"index": 1}]}).encode()
            + b"\n\n"
            for t in tokens
        ],
    ]
    for reads in uncovered:
        assert chat_run(reads) is None, reads[0]
        with_runs, plain = both(reads)
        assert with_runs == plain


def test_what_comes_before_and_after_the_run_is_read_as_in_the_whole_stream() -> None:
    tokens = [f" w{i}" for i in (*range(10), *range(10))] + ["", "", " end"]  # empty tokens are not counted
    reads = text_stream(tokens, usage=False)
    with_runs, plain = both(reads)
    assert with_runs == plain and with_runs.timing.output_tokens == 21
    # A BOM is dropped only at the stream's start: after the run it spoils the next event's field name.
    after = len(tokens) + 1
    reads[after] = b"\xef\xbb\xbf" + reads[after]
    with_runs, plain = both(reads)
    assert with_runs == plain and with_runs.finish_reason is None
    # Also after empty reads, and split across reads.
    for lead in ([b"", b"", b"", b"\xef\xbb\xbf"], [b"\xef", b"", b"\xbb\xbf"]):
        spoiled = [*reads[:after], *lead, reads[after][3:], *reads[after + 1 :]]
        with_runs, plain = both(spoiled)
        assert with_runs == plain and with_runs.finish_reason is None, lead
    # The only [DONE] before the run.
    moved = [b"data: [DONE]\n\n", *text_stream(tokens)[:-1]]
    with_runs, plain = both(moved)
    assert with_runs == plain and "no_done" not in with_runs.findings


def test_a_run_that_starts_another_calls_arguments_is_folded_event_by_event() -> None:
    # The run's fragments name index 1 while the call being streamed is 0: the inline path does not apply.
    reads = call_stream([f"a{i}" for i in range(20)])
    reads[1:1] = [chunk({"tool_calls": [{"index": 1, "id": "call_2", "function": {"name": "g"}}]})]
    reads[0] = chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "c0", "function": {"name": "f"}}]})
    bumped = [r.replace(b'"index":0,"function":{"arguments"', b'"index":1,"function":{"arguments"') for r in reads]
    with_runs, plain = both(bumped)
    assert with_runs == plain and [c.name for c in with_runs.tool_calls] == ["f", "g"]
    # Fragments without an index never take the inline path: each is folded as its own event.
    unindexed = [r.replace(b'{"index":0,"function":{"arguments"', b'{"function":{"arguments"') for r in reads]
    with_runs, plain = both(unindexed)
    assert with_runs == plain and with_runs.tool_calls[0].arguments == "".join(f"a{i}" for i in range(20))


_TOKEN = st.one_of(
    st.sampled_from([" the", " a", "", '"', "\\", "é", "\u2028", "\n", " 🙂", "}", '","x":"']),
    st.text(max_size=6),
)
_SPOIL = st.sampled_from(
    [
        "none",
        "byte",  # one byte of a read changed
        "split",  # a read split in two at a random point
        "join",  # two reads as one
        "bom",  # a BOM at the start of a read
        "cr",  # CRLF framing in a read
        "not_utf8",  # a byte that is not UTF-8 in a read
        "comment",  # an SSE comment line before a read's event
        "cut",  # the stream ends inside a read
        "done_inside",  # a [DONE] inside the stream
        "other_event",  # an event of another shape inside the run
        "partial_line",  # a data line not ended by an empty line before a read
    ]
)


def _spoil(reads: list[bytes], how: str, at: int, cut_at: int) -> list[bytes]:
    if not reads or how == "none":
        return reads
    i = at % len(reads)
    r = reads[i]
    pos = cut_at % max(1, len(r))
    if how == "byte":
        reads[i] = r[:pos] + bytes([(r[pos] + 1) % 256]) + r[pos + 1 :] if r else r
    elif how == "split":
        reads[i : i + 1] = [r[:pos], r[pos:]]
    elif how == "join" and i + 1 < len(reads):
        reads[i : i + 2] = [r + reads[i + 1]]
    elif how == "bom":
        reads[i] = b"\xef\xbb\xbf" + r
    elif how == "cr":
        reads[i] = r.replace(b"\n", b"\r\n")
    elif how == "not_utf8":
        reads[i] = r[:pos] + b"\xff" + r[pos:]
    elif how == "comment":
        reads[i] = b": keep-alive\n\n" + r
    elif how == "cut":
        del reads[i + 1 :]
        reads[i] = r[:pos]
    elif how == "done_inside":
        reads.insert(i, b"data: [DONE]\n\n")
    elif how == "other_event":
        reads.insert(i, chunk({"content": "x"}, "length", model="other"))
    elif how == "partial_line":
        reads.insert(i, b"data: {}\n")
    return reads


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["text", "calls", "reasoning"]),
    tokens=st.lists(_TOKEN, min_size=0, max_size=40),
    usage=st.booleans(),
    ascii_only=st.booleans(),
    spoils=st.lists(st.tuples(_SPOIL, st.integers(0, 200), st.integers(0, 400)), max_size=2),
    gap=st.integers(0, 5000),
    obfuscated=st.sampled_from(["none", *KINDS]),
    seed=st.integers(0, 1 << 16),
)
def test_any_stream_parses_with_runs_as_event_by_event(
    kind: str,
    tokens: list[str],
    usage: bool,
    ascii_only: bool,
    spoils: list[tuple[str, int, int]],
    gap: int,
    obfuscated: str,
    seed: int,
) -> None:
    if kind == "text":
        reads = text_stream(tokens, usage)
    elif kind == "calls":
        reads = call_stream(tokens)
    else:
        reads = [chunk({"reasoning_content": t}, ascii_only=ascii_only) for t in tokens] + text_stream(
            tokens[:3], usage
        )
    if not ascii_only:
        reads = [r.replace(b'"m"', '"ḿ"'.encode()) for r in reads]
    if obfuscated != "none":
        reads = obfuscate(reads, obfuscated, seed)
    for how, at, cut_at in spoils:
        reads = _spoil(reads, how, at, cut_at)
    with_runs, plain = both(reads, [gap + i for i in range(len(reads))])
    assert with_runs == plain


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["text", "calls"]),
    tokens=st.lists(_TOKEN, min_size=8, max_size=40),
    cuts=st.lists(st.integers(0, 20_000), max_size=30),
    glue=st.lists(st.integers(0, 60), max_size=15),
)
def test_reads_regrouped_as_a_network_delivers_them_parse_as_event_by_event(
    kind: str, tokens: list[str], cuts: list[int], glue: list[int]
) -> None:
    reads = text_stream(tokens) if kind == "text" else call_stream(tokens)
    for at in sorted(set(glue), reverse=True):  # two reads delivered as one
        if at + 1 < len(reads):
            reads[at : at + 2] = [reads[at] + reads[at + 1]]
    data = b"".join(reads)
    ends = [0, *sorted({c % len(data) for c in cuts}), len(data)]  # and reads cut anywhere
    if cuts:
        reads = [data[a:b] for a, b in pairwise(ends) if b > a]
    with_runs, plain = both(reads, [3 * i for i in range(len(reads))])
    assert with_runs == plain


def test_a_stream_whose_reads_hold_several_events_is_folded_as_a_run() -> None:
    tokens = [f" w{i}" for i in range(60)]
    events = text_stream(tokens)
    reads = [events[0], *(b"".join(events[i : i + 3]) for i in range(1, len(events), 3))]
    found = chat_run(reads)
    assert found is not None and found[0].held is not None
    with_runs, plain = both(reads)
    assert with_runs == plain and with_runs.content == "".join(tokens)
