from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from bench.sse import SSEParser, events_with_times


def parse_all(chunks: list[bytes]) -> tuple[list[str], bool]:
    p = SSEParser()
    out: list[str] = []
    for c in chunks:
        out.extend(e.data for e in p.feed(c))
    return out, p.pending


def test_openai_style_stream() -> None:
    stream = b'data: {"a":1}\n\ndata: {"a":2}\n\ndata: [DONE]\n\n'
    assert parse_all([stream]) == (['{"a":1}', '{"a":2}', "[DONE]"], False)


def test_multiline_data_comments_crlf_and_fields() -> None:
    stream = b": keepalive\r\nevent: delta\r\ndata: one\r\ndata:two\r\nid: 7\r\nretry: 30\r\n\r\ndata\n\n"
    p = SSEParser()
    events = p.feed(stream)
    assert [(e.data, e.event, e.id, e.retry, e.comments) for e in events] == [
        ("one\ntwo", "delta", "7", 30, 1),
        ("", "message", "7", None, 0),
    ]


def test_event_split_across_reads_and_cr_lf_boundary() -> None:
    chunks = [b"da", b"ta: x\r", b"\n\r", b"\ndata: y\r\r"]
    assert parse_all(chunks) == (["x", "y"], False)


def test_unfinished_event_is_not_dispatched_but_reported() -> None:
    assert parse_all([b"data: a\n\ndata: b\n"]) == (["a"], True)
    assert parse_all([b"data: a\n\n: trailing comment\n"]) == (["a"], False)


def test_bom_is_dropped_once() -> None:
    assert parse_all([b"\xef\xbb\xbfdata: a\n\n"]) == (["a"], False)


def test_times_are_those_of_the_completing_read() -> None:
    chunks = [b"data: a\n", b"\ndata: b\n\nda", b"ta: c\n\n"]
    events, cut = events_with_times(chunks, [10, 20, 30])
    assert events == [(20, "a"), (20, "b"), (30, "c")]
    assert not cut


sse_text = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "data: ",
                "data:",
                "data",
                ": c",
                "event: e",
                "event:",
                "id: 1",
                "retry: 5",
                "",
                "\ufeff",
                "x: y",
            ]
        ),
        st.text(alphabet='ab{}":, é', max_size=8),
    ),
    max_size=25,
)


@given(
    parts=sse_text,
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_fast_path_agrees_with_incremental_parser(parts: list[str], newline: str, cuts: list[int]) -> None:
    raw = newline.join(parts).encode()
    bounds = sorted({c for c in cuts if c <= len(raw)} | {0, len(raw)})
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)] or [b""]
    times = list(range(len(chunks)))
    incremental: list[tuple[int, str]] = []
    p = SSEParser()
    for c, t in zip(chunks, times, strict=True):
        incremental.extend((t, e.data) for e in p.feed(c))
    assert events_with_times(chunks, times) == (incremental, p.pending)


@given(raw=st.binary(max_size=300), cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10))
def test_chunking_never_changes_the_events(raw: bytes, cuts: list[int]) -> None:
    bounds = sorted({c for c in cuts if c <= len(raw)} | {0, len(raw)})
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    assert parse_all(chunks) == parse_all([raw])


def test_an_event_name_cleared_by_an_empty_event_line_leaves_nothing_pending() -> None:
    # Found by hypothesis: the fast path counted any named event: line, the parser only the last one.
    for tail, pending in ((b"event: e\nevent:\n", False), (b"event:\nevent: e\n", True), (b"event: e\n", True)):
        parser = SSEParser()
        parser.feed(tail)
        assert events_with_times([tail], [0]) == ([], pending)
        assert parser.pending is pending
