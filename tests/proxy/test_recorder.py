from __future__ import annotations

import ast
import itertools
import json
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core.cassette.records import Response
from bench.core.sse import SSEParser
from bench.proxy import recorder
from bench.proxy.recorder import MAX_WATCHED_EVENTS, TokenWatch, carries_token, stream_finished
from tests.support.records import live_exchange


def sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return sse({"model": "m1", "system_fingerprint": "fp_x", "choices": [{"delta": delta, "finish_reason": finish}]})


def test_tokens_are_content_reasoning_or_tool_calls_never_the_role_frame() -> None:
    assert not carries_token({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    assert not carries_token({"choices": [], "usage": {"total_tokens": 3}})
    assert carries_token({"choices": [{"delta": {"content": "Hi"}}]})
    assert carries_token({"choices": [{"delta": {"reasoning_content": "hmm"}}]})
    assert carries_token({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "f"}}]}}]})
    assert carries_token({"choices": [{"text": "legacy"}]})
    assert carries_token({"type": "response.output_text.delta", "delta": "x"})
    assert not carries_token({"choices": "garbage"}) and not carries_token([1])


def test_token_watch_finds_the_first_token_across_split_reads() -> None:
    watch = TokenWatch()
    data = chunk({"role": "assistant", "content": ""}) + chunk({"content": "Hello"})
    assert not watch.feed(data[:10])
    assert watch.feed(data[10:]) and watch.found
    assert (watch.model, watch.system_fingerprint) == ("m1", "fp_x")


def parser_watch(reads: list[bytes]) -> tuple[int | None, int, str | None, str | None]:
    """What TokenWatch must find, worked out with the SSE parser alone: (index of the read that completed the first
    token event, events seen, model, system_fingerprint)."""
    parser, events, model, fp = SSEParser(), 0, None, None
    for i, read in enumerate(reads):
        for event in parser.feed(read):
            events += 1
            try:
                obj = orjson.loads(event.data) if event.data != "[DONE]" else None
            except orjson.JSONDecodeError:
                obj = None
            if isinstance(obj, dict):
                model = model or (obj.get("model") if isinstance(obj.get("model"), str) else None)
                got = obj.get("system_fingerprint")
                fp = fp or (got if isinstance(got, str) else None)
            if carries_token(obj):
                return i, events, model, fp
        if events >= MAX_WATCHED_EVENTS:
            break
    return None, events, model, fp


def token_watch(reads: list[bytes]) -> tuple[int | None, int, str | None, str | None]:
    watch = TokenWatch()
    for i, read in enumerate(reads):
        if watch.feed(read):
            return (i if watch.found else None), watch.events, watch.model, watch.system_fingerprint
    return None, watch.events, watch.model, watch.system_fingerprint


_pieces = st.sampled_from(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hi"}),
        chunk({"content": "\ufffd\u00e9"}),
        b"data: {}\n\n",
        b"data: \n\n",
        b"data: [DONE]\n\n",
        b'data:{"model":"m2"}\n\n',
        b'\xef\xbb\xbfdata: {"model":"bom"}\n\n',
        b": comment\n\n",
        b"event: x\n",
        b'data: {"choices":[{"delta":{"content":"\xff"}}]}\n\n',
        b'data: {"model":"m3"}\r\n\r\n',
        b"\r",
        b"\n",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_pieces, max_size=8), st.lists(st.integers(0, 400), max_size=6))
def test_token_watch_finds_what_the_parser_finds_however_the_reads_are_framed(
    pieces: list[bytes], cuts: list[int]
) -> None:
    # Whole one-event reads take TokenWatch's shortcut; anything else (split events, CR, BOM, several events in a
    # read) goes through the parser: the first token's read, the events seen and the identity must not differ.
    stream = b"".join(pieces)
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    split = [stream[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    for reads in (pieces, split):
        reads = [r for r in reads if r]
        assert token_watch(reads) == parser_watch(reads)


def test_token_watch_gives_up_on_long_tokenless_streams() -> None:
    watch = TokenWatch()
    done = [watch.feed(b": keepalive\n\ndata: {}\n\n") for _ in range(MAX_WATCHED_EVENTS)]
    assert done[-1] and not any(done[:-1]) and not watch.found


def test_stream_end_detection() -> None:
    assert stream_finished([chunk({"content": "a"}), b"data: [DONE]\n\n"])
    assert stream_finished([chunk({}, "stop")])  # finish_reason without [DONE]
    assert not stream_finished([chunk({"content": "a"}), chunk({"content": "b"})])
    assert not stream_finished([])


def test_record_times_are_microsecond_deltas_from_t0() -> None:
    ex = live_exchange(1_000_000_000, started_us=5, path="/v1/x", fp="fp1:0", upstream_url="http://u")
    ex.answered(Response(streamed=True), 1_001_000_000, frozenset())
    ex.chunks.extend([chunk({"content": "a"}), b"data: [DONE]\n\n"])
    ex.times.extend([1_002_000_000, 1_002_500_000])
    ex.settle_stream()
    record = ex.to_record(end_ns=1_003_000_000)
    assert record.response.chunk_us == [2000, 500]
    assert record.timing.first_byte == 2000 and record.timing.end == 3000
    assert record.outcome == "complete" and record.response.raw_bytes == sum(map(len, ex.chunks))


def _writes_to_ex(tree: ast.AST) -> list[int]:
    """Lines that assign, augment or delete an attribute of `ex` (or an item of one), the proxy's name for an
    exchange."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        flat = [t for target in targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
        for target in flat:
            base = target
            while isinstance(base, ast.Attribute | ast.Subscript):
                base = base.value
            if base is not target and isinstance(base, ast.Name) and base.id == "ex":
                lines.append(node.lineno)
    return lines


def test_the_live_exchange_changes_only_through_its_own_methods() -> None:
    # Its state changes are the transitions in recorder.py (issue 29: it was written from 7 modules); the per-read
    # loops append to its reads through local names, which this does not see, and is meant not to.
    folder = Path(recorder.__file__).parent
    found = {}
    for path in sorted(folder.rglob("*.py")):
        if path.name != "recorder.py":
            lines = _writes_to_ex(ast.parse(path.read_text()))
            if lines:
                found[str(path.relative_to(folder))] = lines
    assert found == {}
    planted = ast.parse("ex.status = 1\nex.own_ns += 2\ndel ex.times[:3]\nex.a, b = 1, 2\nx.status = 1\n")
    assert _writes_to_ex(planted) == [1, 2, 3, 4]
