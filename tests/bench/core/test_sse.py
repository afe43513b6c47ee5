from __future__ import annotations

import bisect
import itertools
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.core.sse import SSEParser, _slow_events, event_payloads, events_with_times


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


def test_an_event_ending_exactly_at_a_read_boundary_has_that_reads_time() -> None:
    # Several events per read, the last one ending exactly where its read ends (the next read starts a new event).
    chunks = [b"data: a\n\ndata: b\n\n", b"data: c\n\ndata: d\n\n", b"data: e\n\n"]
    assert events_with_times(chunks, [10, 20, 30]) == ([(10, "a"), (10, "b"), (20, "c"), (20, "d"), (30, "e")], False)
    # The same with comments (the general path) and with CRLF (the incremental path).
    chunks = [b": c\ndata: a\n\ndata: b\n\n", b"data: c\n\n"]
    assert events_with_times(chunks, [10, 20]) == ([(10, "a"), (10, "b"), (20, "c")], False)
    chunks = [b"data: a\r\n\r\ndata: b\r\n\r\n", b"data: c\r\n\r\n"]
    assert events_with_times(chunks, [10, 20]) == ([(10, "a"), (10, "b"), (20, "c")], False)


def test_a_stream_ending_inside_an_event_is_reported_cut() -> None:
    for tail in (b"event: delta\n", b"data: b\n", b"data: b", b"da", b"event: delta"):
        stream = [b"data: a\n\n", tail]
        assert events_with_times(stream, [1, 2]) == ([(1, "a")], True), tail
        assert parse_all(stream) == (["a"], True), tail
    for tail in (b": comment\n", b"\n", b"id: 3\n", b"retry: 5\n", b"event:\n"):
        stream = [b"data: a\n\n", tail]
        assert events_with_times(stream, [1, 2]) == ([(1, "a")], False), tail
        assert parse_all(stream) == (["a"], False), tail


def test_a_stream_cut_after_a_line_whose_value_holds_a_colon_is_reported_cut() -> None:
    # JSON payloads are full of colons: a field's name ends at the first one, so `data: {"a":2}` is still data.
    for tail in (b'data: {"a":2}\n', b"event: response.output_text.delta\nevent: a:b\n", b"data: x:y\nid: 1\n"):
        stream = [b'data: {"a":1}\n\n', tail]
        assert events_with_times(stream, [1, 2]) == ([(1, '{"a":1}')], True), tail
        assert parse_all(stream) == (['{"a":1}'], True), tail


def test_retry_takes_ascii_digits_only() -> None:
    events = SSEParser().feed("retry: \u00b2\ndata: a\n\nretry: 12\ndata: b\n\n".encode())
    assert [(e.data, e.retry) for e in events] == [("a", None), ("b", 12)]


class Reference:
    """The HTML standard's event-stream rules written plainly (line by line, whole stream at once), independent of
    bench.core.sse: each event with the index of the read that holds the first byte of the line ending that dispatched
    it."""

    LINE_END = re.compile(rb"\r\n|\r|\n")

    def __init__(self, chunks: list[bytes]) -> None:
        data = b"".join(chunks)
        ends = list(itertools.accumulate(len(c) for c in chunks))
        self.events: list[tuple[int, str, str, str | None, int | None, int]] = []
        fields: dict[str, object] = {"data": [], "event": "", "id": None, "retry": None, "comments": 0}
        pos = 0
        first = True
        for m in self.LINE_END.finditer(data):
            line = data[pos : m.start()].decode("utf-8", "replace")
            read = bisect.bisect_right(ends, m.start())
            pos = m.end()
            if first:
                first = False
                line = line.removeprefix("\ufeff")
            self._line(line, read, fields)
        self.tail = data[pos:]  # any bytes of an unfinished line (a lone BOM too) mean the stream was cut
        self.pending = bool(self.tail or fields["data"] or fields["event"])

    def _line(self, line: str, read: int, f: dict[str, object]) -> None:
        data = f["data"]
        assert isinstance(data, list)
        if line == "":
            if data:
                event = str(f["event"]) or "message"
                self.events.append((read, "\n".join(data), event, f["id"], f["retry"], f["comments"]))  # type: ignore[arg-type]
            f.update({"data": [], "event": "", "retry": None, "comments": 0})
        elif line.startswith(":"):
            f["comments"] = int(f["comments"]) + 1  # type: ignore[call-overload]
        else:
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                f["event"] = value
            elif name == "id" and "\0" not in value:
                f["id"] = value
            elif name == "retry" and value and all("0" <= ch <= "9" for ch in value):
                f["retry"] = int(value)


# Lines as servers write them (a field, a colon, maybe a space, a value) and as a hostile one might.
field_line = st.builds(
    lambda name, sep, value: name + sep + value,
    st.sampled_from(["data", "event", "id", "retry", "x", "", "dat", "\ufeffdata"]),
    st.sampled_from([": ", ":", "", ":  "]),
    st.text(alphabet='ab{}":, é0129\u00b2\0', max_size=8),
)
VALUE = st.text(alphabet='ab{}":, é0129\u00b2\0', max_size=8)
data_line = st.builds(lambda sep, value: "data" + sep + value, st.sampled_from([": ", ":"]), VALUE)
# Events as servers frame them (lines, then an empty line), mixed with stray lines; a stream may stop anywhere.
sse_event = st.lists(
    st.one_of(data_line, data_line, field_line, st.sampled_from([": c", ":", "\ufeff"])), min_size=1, max_size=4
).map(lambda lines: [*lines, ""])
sse_lines = st.lists(st.one_of(sse_event, st.lists(field_line, max_size=2)), max_size=8).map(
    lambda groups: [line for group in groups for line in group]
)


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({c for c in cuts if c <= len(raw)} | {0, len(raw)})
    return [raw[a:b] for a, b in itertools.pairwise(bounds)] or [b""]


@settings(max_examples=200)
@given(
    lines=sse_lines,
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    end=st.sampled_from(["", "\n", "\n\n"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_both_parsers_agree_with_the_standard(lines: list[str], newline: str, end: str, cuts: list[int]) -> None:
    raw = (newline.join(lines) + end.replace("\n", newline)).encode()
    chunks = split(raw, cuts)
    times = [100 + 10 * i for i in range(len(chunks))]
    want = Reference(chunks)
    p = SSEParser()
    incremental: list[tuple[int, str, str, str | None, int | None, int]] = []
    for i, c in enumerate(chunks):
        incremental.extend((i, e.data, e.event, e.id, e.retry, e.comments) for e in p.feed(c))
    assert incremental == want.events
    assert p.pending == want.pending
    assert events_with_times(chunks, times) == ([(times[e[0]], e[1]) for e in want.events], want.pending)


def test_the_generated_streams_exercise_what_they_claim() -> None:
    """The strategy is only as good as what it produces: events with payloads, several per read, cut streams."""
    with_payload = several_per_read = cut = 0

    @settings(max_examples=200, database=None, derandomize=True)
    @given(lines=sse_lines, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8))
    def count(lines: list[str], cuts: list[int]) -> None:
        nonlocal with_payload, several_per_read, cut
        ref = Reference(split("\n".join(lines).encode(), cuts))
        with_payload += any(e[1] for e in ref.events)
        several_per_read += len({e[0] for e in ref.events}) < len(ref.events)
        cut += ref.pending

    count()
    assert with_payload >= 30 and several_per_read >= 10 and cut >= 30, (with_payload, several_per_read, cut)


@given(raw=st.binary(max_size=300), cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10))
def test_any_bytes_in_any_reads_give_the_standards_events(raw: bytes, cuts: list[int]) -> None:
    chunks = split(raw, cuts)
    want = Reference(chunks)
    assert parse_all(chunks) == ([e[1] for e in want.events], want.pending)
    times = list(range(len(chunks)))
    assert events_with_times(chunks, times) == ([(times[e[0]], e[1]) for e in want.events], want.pending)


def test_an_event_name_cleared_by_an_empty_event_line_leaves_nothing_pending() -> None:
    # Found by hypothesis: the fast path counted any named event: line, the parser only the last one.
    for tail, pending in ((b"event: e\nevent:\n", False), (b"event:\nevent: e\n", True), (b"event: e\n", True)):
        parser = SSEParser()
        parser.feed(tail)
        assert events_with_times([tail], [0]) == ([], pending)
        assert parser.pending is pending


def test_extra_empty_lines_between_events_lose_nothing() -> None:
    # Servers send bare newlines as keep-alives: an empty line with no data dispatches nothing and ends nothing.
    for gap in (b"\n", b"\n\n", b"\n\n\n"):
        for head in (b"", b": keepalive\n"):  # plain events, and with a comment (not the one-line-per-event framing)
            stream = head + b"data: a\n\n" + gap + b"data: b\n\n" + gap + b"event: x\ndata: c\n\n"
            want = (["a", "b", "c"], False)
            assert parse_all([stream]) == want, stream
            assert events_with_times([stream], [5]) == ([(5, "a"), (5, "b"), (5, "c")], False), stream
            reads = [stream[: len(head) + 9], stream[len(head) + 9 :]]  # the gap starts the second read
            assert events_with_times(reads, [5, 6]) == ([(5, "a"), (6, "b"), (6, "c")], False), stream


def test_events_framed_with_comments_take_the_time_of_the_read_that_completed_each() -> None:
    # Comments and multi-line data (the general path), one event completed in each of four reads, one read carrying
    # two: every event is stamped with its own read's time, never an earlier or the last one.
    chunks = [b": c\ndata: a\n\n", b"data: b\ndata: b\n\n: c\n", b"data: c\n\ndata: d\n\n", b"data: e\n\n"]
    want = [(10, "a"), (20, "b\nb"), (30, "c"), (30, "d"), (40, "e")]
    assert events_with_times(chunks, [10, 20, 30, 40]) == (want, False)


def test_after_a_keepalive_only_a_line_named_data_is_data() -> None:
    # A field's name is everything before the colon: " data" and "Xdata" are other fields and dispatch nothing.
    for line in (b" data: b", b"Xdata: b", b"\tdata: b", b"\x0bdata: b"):
        stream = b"data: a\n\n\n" + line + b"\n\ndata: c\n\n"
        assert parse_all([stream]) == (["a", "c"], False), line
        assert events_with_times([stream], [5]) == ([(5, "a"), (5, "c")], False), line


# Streams that take each path of the parsers (one event per read, several, comments and other fields, the Responses
# API's `event:` framing, CR and CRLF, a BOM, bytes that are not UTF-8, keep-alive empty lines, cut events), each
# checked against the standard's rules in every split into two and three reads: hypothesis samples such streams, this
# covers the small ones whole, with the same answers on every run.
TRICKY_STREAMS = [
    b"data: a\n\ndata: b\n\n",
    b"data: {}\n\ndata: [DONE]\n\n",
    b": c\ndata: a\n\ndata: b\ndata: c\n\n",
    b"event: x\ndata: a\n\nevent: y\ndata: b\n\n",
    b"event: x\ndata: a\ndata: b\n\nevent:\n\n",
    b"data: a\r\n\r\ndata: b\r\r",
    b"\xef\xbb\xbfdata: a\n\n",
    b"data: \xff\xfe\n\ndata: ok\n\n",
    b": \xff\ndata: \xe9\n\n",
    b"data: a\n\n\n\ndata: b\n\n\n",
    b"data: a\n\n\n data: b\n\n",
    b"data: a\n\nevent: e\n",
    b"data: a\n\ndata: b",
    b"id: 1\nretry: 5\ndata:a\n\n:c\n\n",
    b"data\n\ndata:\n\ndata: x\n\n",
    b"data: a\n\nid: 7\n",
    b"data: a\n\nevent: \n",
    b"data: a\n\nevent:x\n",
    b"event: x\nXdata: a\n\n",
    b"data: a\n\n\n data: b\n",
    b"data: a\n\n\nXdata: b\n",
    b"data: a\ndata: b\n\nid: 1\nid: 2\n",
    b"data: a\ndata: b\n\n",
    b"data: a\n\ndata: b\r\r",
    b"\ndata: a\r\r",
    b"\n\xef\xbb\xbfdata: a\n\n",
]


def test_a_new_parser_holds_nothing() -> None:
    assert SSEParser().pending is False
    assert events_with_times([], []) == ([], False)


def test_small_streams_in_every_split_give_the_standards_events() -> None:
    for raw in TRICKY_STREAMS:
        n = len(raw)
        for i in range(n + 1):
            for j in range(i, n + 1):
                chunks = [c for c in (raw[:i], raw[i:j], raw[j:]) if c] or [b""]
                want = Reference(chunks)
                p = SSEParser()
                got = [(k, e.data, e.event, e.id, e.retry, e.comments) for k, c in enumerate(chunks) for e in p.feed(c)]
                assert (got, p.pending) == (want.events, want.pending), chunks
                times = [100 + 10 * k for k in range(len(chunks))]
                assert events_with_times(chunks, times) == ([(times[e[0]], e[1]) for e in want.events], want.pending), (
                    chunks
                )


# Bytes that are not UTF-8 inside an event's data: every path of `event_payloads` returns them as the standard decodes
# them (U+FFFD, UTF-8 encoded), as `_slow_events` (the incremental parser) does; the JSON parsers after it then see
# the text a client sees, and keeping events (`load_json`) does not drop one on one path and keep it on another.
NOT_UTF8 = [b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"ok\x80", b"\xc3\xa9\xff"]


def test_bytes_that_are_not_utf8_come_back_as_replacement_characters_on_every_path() -> None:
    r = "\ufffd".encode()
    cases: list[tuple[list[bytes], list[bytes]]] = [
        # one event per read: the first fast path
        ([b'data: {"a":"\xff"}\n\n', b"data: [DONE]\n\n"], [b'{"a":"' + r + b'"}', b"[DONE]"]),
        # several events in one read, one cut across two: the second fast path
        ([b"data: \xe9\n\ndata: \xc3", b"\n\n"], [r, r]),
        # a keep-alive LF first (a one-line `data:` block of the general path)
        ([b"data: a\n\n\ndata: \xff\n\n"], [b"a", r]),
        # the Responses API's `event:` framing
        ([b"event: x\ndata: \xff\n\n"], [r]),
        # a comment first (the general path's line-by-line reading)
        ([b": c\ndata: \xff\n\n"], [r]),
        # one invalid sequence is one U+FFFD; valid UTF-8 around it is kept
        ([b"data: \xc3\xa9\xed\xa0\x80\n\n"], ["é".encode() + r * 3]),
    ]
    for chunks, want in cases:
        times = list(range(10, 10 + len(chunks)))
        stamps, payloads, cut = event_payloads(chunks, times)
        assert payloads == want, chunks
        assert (stamps, payloads, cut) == _slow_events(chunks, times), chunks
        assert events_with_times(chunks, times)[0] == [(t, p.decode()) for t, p in zip(stamps, payloads, strict=True)]


def test_a_stream_that_is_all_utf8_keeps_its_payload_bytes() -> None:
    chunks = ['data: {"a":"é😀"}\n\n'.encode(), b"data: [DONE]\n\n"]
    assert event_payloads(chunks, [1, 2]) == ([1, 2], ['{"a":"é😀"}'.encode(), b"[DONE]"], False)


# An event's data as arbitrary bytes (no line ends), framed the ways that take each path.
raw_value = st.one_of(st.binary(max_size=12), st.sampled_from(NOT_UTF8)).map(
    lambda b: b.replace(b"\n", b"").replace(b"\r", b"")
)
raw_event = st.builds(
    lambda head, value: head + b"data: " + value + b"\n\n",
    st.sampled_from([b"", b"", b"event: x\n", b": c\n", b"\n", b"id: 1\n"]),
    raw_value,
)


@given(events=st.lists(raw_event, max_size=6), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_fast_and_general_paths_agree_on_arbitrary_bytes(events: list[bytes], cuts: list[int]) -> None:
    raw = b"".join(events)
    for chunks in (split(raw, cuts), events or [b""]):  # any reads, and one event per read (the first fast path)
        times = [100 + 10 * i for i in range(len(chunks))]
        want = Reference(chunks)
        stamps, payloads, cut = event_payloads(chunks, times)
        assert (stamps, payloads, cut) == _slow_events(chunks, times)
        assert payloads == [e[1].encode() for e in want.events]
        assert stamps == [times[e[0]] for e in want.events]
        assert all(p.decode() is not None for p in payloads)  # valid UTF-8, whatever the reads held


# Reads of three LFs each that look like the Responses API's `event:`/`data:` framing, and some that only nearly do
# (the LFs elsewhere, a read without its `event:` line, two `data:` lines, a comment): the fast path must take only
# the real framing and give, for all of them, what the standard's parser gives.
# UTF-8 values (bytes that are not take the parser's path before any fast path is tried).
text_value = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=8).map(
    str.encode
)
responses_read = st.one_of(
    st.builds(lambda name, value: b"event: " + name + b"\ndata: " + value + b"\n\n", text_value, text_value),
    st.builds(lambda value: b"data: " + value + b"\n\n\n", text_value),
    st.builds(lambda a, b: b"data: " + a + b"\ndata: " + b + b"\n\n", text_value, text_value),
    st.builds(lambda a, b: b": " + a + b"\ndata: " + b + b"\n\n", text_value, text_value),
    st.builds(lambda a, b: b"event: " + a + b"\n\n" + b + b"\n", text_value, text_value),
    st.builds(lambda a: b"event: " + a + b"\ndata: x\n", text_value),
    st.builds(lambda a: b"event: " + a + b"\ndata: x\n\n\n\n", text_value),
    st.builds(lambda a, b: b"event: " + a + b"\nid: " + b + b"\n\n", text_value, text_value),
    st.just(b"\n\n\n"),
)


@example(reads=[b"data: a\ndata: b\n\n"], cuts=[])
@example(reads=[b"event: a\ndata: b\n", b"\nevent: c\ndata: d\n\n"], cuts=[])
@example(reads=[b"event: a\n\ndata: x\n\n", b"event: b\n\n"], cuts=[])
@given(reads=st.lists(responses_read, max_size=6), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4))
def test_responses_framing_fast_path_agrees_with_the_standard(reads: list[bytes], cuts: list[int]) -> None:
    for chunks in (reads or [b""], split(b"".join(reads), cuts)):
        times = [100 + 10 * i for i in range(len(chunks))]
        want = Reference(chunks)
        stamps, payloads, cut = event_payloads(chunks, times)
        assert (stamps, payloads, cut) == _slow_events(chunks, times)
        assert payloads == [e[1].encode() for e in want.events]
        assert stamps == [times[e[0]] for e in want.events]
