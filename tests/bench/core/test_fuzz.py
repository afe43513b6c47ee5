"""Fuzzing what reads untrusted bytes: the cassette reader (damaged files, crafted records), the SSE and body
parsers, and the JSON checks. Whatever the input: records within the bounds of docs/cassette-format.md, or one line
(CassetteError at open, `problem` after); never another exception, never a record out of bounds.

The suite runs a few hundred examples per property (seconds). A longer run: BENCH_FUZZ_EXAMPLES=20000 pytest THIS.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path
from typing import Any

import msgpack
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.catalog.model import Check
from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.records import MAX_NAME, MAX_SPAN_US, MAX_TEXT, MAX_TIME_US, Exchange, Response, Settings
from bench.core.errors import CassetteError
from bench.core.parse import parse_exchange
from bench.scorer.checks import run_check
from bench.scorer.synth import exchange_record, sse_chunks
from tests.scorer.helpers import ctx
from tests.support import hostile_cassettes as hc

EXAMPLES = int(os.environ.get("BENCH_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=EXAMPLES or 150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,  # each run explores afresh; a failure prints its example
)


@functools.cache
def sound_cassette() -> bytes:
    """A small cassette bench wrote: streamed and plain answers, a tool call, an end record."""
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "s.cassette"
        with CassetteWriter(path, settings=Settings(mode="record")) as writer:
            writer.put(exchange_record(sse_chunks("Answer: 13"), id="a", tags=hc.TAGS))
            writer.put(exchange_record(sse_chunks("", [("get_weather", {"city": "Paris"})]), id="b"))
            writer.put(exchange_record([b'{"choices":[{"message":{"content":"x"}}]}'], id="c", streamed=False))
        return path.read_bytes()


def assert_within_bounds(record: Exchange) -> None:
    response = record.response
    assert 0 <= record.started <= MAX_TIME_US
    assert not response.chunk_us or len(response.chunk_us) == len(response.chunks)
    assert all(0 <= t <= MAX_SPAN_US for t in response.chunk_us)
    assert len(record.id) <= MAX_NAME and (record.error is None or len(record.error) <= MAX_TEXT)
    assert all(len(k) <= MAX_NAME and len(v) <= MAX_NAME for k, v in record.tags.items())


def read_all(data: bytes) -> list[Exchange]:
    """Every exchange of a file holding `data`, each checked; CassetteError (one line) is an allowed answer."""
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "f.cassette"
        path.write_bytes(data)
        try:
            reader = CassetteReader(path)
        except CassetteError as exc:
            assert "\n" not in str(exc)
            return []
        records = list(reader)
        assert reader.problem is None or "\n" not in reader.problem
    for record in records:
        assert_within_bounds(record)
        parse_exchange(record)  # what every reader downstream does next
    return records


edits = st.lists(
    st.tuples(
        st.sampled_from(["flip", "insert", "delete", "cut", "copy"]), st.integers(0, 1 << 16), st.binary(max_size=64)
    ),
    min_size=1,
    max_size=6,
)


@FUZZ
@given(edits)
def test_any_damage_to_a_cassette_reads_or_says_one_line(changes: list[tuple[str, int, bytes]]) -> None:
    data = bytearray(sound_cassette())
    for op, at, blob in changes:
        at %= max(1, len(data))
        if op == "flip" and data:
            data[at] ^= (blob[0] if blob else 0x55) or 1
        elif op == "insert" or not data:
            data[at:at] = blob
        elif op == "delete":
            del data[at : at + len(blob) + 1]
        elif op == "cut":
            del data[at:]
        else:
            data[at:at] = data[at : at + 64]
    read_all(bytes(data))


MSGPACK_INTS = st.integers(-(2**63), 2**64 - 1)  # what msgpack can hold
SCALARS = st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(
    SCALARS | st.integers(-(2**63), 2**63 - 1),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
values = st.recursive(
    SCALARS | MSGPACK_INTS | st.floats() | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
FIELDS = ["id", "started", "mode", "request", "response", "timing", "upstream", "outcome", "error", "tags", "redacted"]
SUBFIELDS = ["status", "headers", "chunks", "streamed", "raw_bytes", "cut", "parts", "sent_upstream", "end", "model"]


@st.composite
def crafted_records(draw: st.DrawFn) -> dict[str, Any]:
    """A sound exchange map with some fields (and sub-fields) replaced by anything msgpack can hold."""
    doc = hc.exchange_map(draw(st.text(max_size=8)))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3)):
        doc[name] = draw(values)
    for name in draw(st.lists(st.sampled_from(SUBFIELDS), max_size=3)):
        parent = doc.get(draw(st.sampled_from(["request", "response", "timing", "upstream"])))
        if isinstance(parent, dict):
            parent[name] = draw(values)
    return doc


times = st.none() | st.lists(MSGPACK_INTS, max_size=12)


@FUZZ
@given(st.lists(st.tuples(crafted_records(), times, st.booleans()), min_size=1, max_size=4), st.integers(0, 3))
def test_crafted_records_are_read_within_bounds_or_skipped(
    records: list[tuple[dict[str, Any], list[int] | None, bool]], depth_at: int
) -> None:
    payloads = []
    for doc, column, as_list in records:
        packed = msgpack.packb(doc, use_bin_type=True)
        fits = column is None or all(0 <= t < 2**32 for t in column)
        payloads.append(hc.payload(packed, column, as_list=as_list or not fits))
    payloads.insert(depth_at % (len(payloads) + 1), hc.payload(hc.deep_msgpack(5000), None))
    with tempfile.TemporaryDirectory() as where:
        read_all(hc.write(Path(where) / "c.cassette", payloads).read_bytes())


sse_lines = st.one_of(
    st.builds(
        lambda v: b"data: " + orjson.dumps(v) + b"\n\n", st.fixed_dictionaries({"choices": st.lists(json_values)})
    ),
    st.builds(lambda n: b"data: " + b"[" * n + b"]" * n + b"\n\n", st.integers(0, 300_000)),
    st.builds(lambda b: b"data: " + b + b"\n\n", st.binary(max_size=80)),
    st.binary(max_size=80),
    st.just(b"data: [DONE]\n\n"),
    st.just(b"event: error\ndata: {}\n\n"),
)


@FUZZ
@given(
    st.lists(sse_lines, max_size=8),
    st.sampled_from(["/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings", "/x"]),
    st.sampled_from([[], [["Content-Encoding", "gzip"]], [["Content-Encoding", "br"]], [["Content-Type", "x"]]]),
    st.booleans(),
)
def test_any_stream_or_body_parses_to_a_result(
    chunks: list[bytes], path: str, headers: list[list[str]], streamed: bool
) -> None:
    record = exchange_record(chunks, id="f", streamed=streamed)
    record.request.path = path
    record.response = Response(
        status=200, headers=headers, chunks=chunks, chunk_us=[7] * len(chunks), streamed=streamed
    )
    parsed = parse_exchange(record)
    assert isinstance(parsed.findings, list)


answers = st.one_of(
    st.text(max_size=200),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(0, 200_000)),
    st.builds(lambda n: '{"a":' * n + "1" + "}" * n, st.integers(0, 100_000)),
    st.builds(lambda v: "```json\n" + orjson.dumps(v).decode() + "\n```", json_values),
)
JSON_CHECKS = [
    Check("json_schema", {"schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}),
    Check("json_field_equals", {"path": "a.b", "value": 1}),
]


@FUZZ
@given(answers, st.sampled_from(JSON_CHECKS))
def test_any_answer_gets_a_json_verdict(answer: str, check: Check) -> None:
    score = run_check(ctx(answer), 0, check)
    assert 0.0 <= score.score <= 1.0 and score.status in ("scored", "skipped")
