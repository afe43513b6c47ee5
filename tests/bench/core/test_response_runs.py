"""The Responses API's delta runs (bench.core.event_runs numbered, bench.core.response_runs): a stream parsed with its
run folded in bulk equals the same stream parsed event by event, on generated streams with every kind of damage."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bench.core.parse_responses as parse_responses
from bench.core import event_runs, run_proofs
from bench.core.event_runs import find_run
from bench.core.parse import parse_exchange
from bench.core.parsed import ParsedExchange
from bench.core.response_runs import response_run
from bench.core.run_proofs import MAX_COUNTED
from tests.support.obfuscation import KINDS, obfuscate
from tests.support.records import exchange

DELTAS = (
    "response.output_text.delta",
    "response.function_call_arguments.delta",
    "response.reasoning_summary_text.delta",
    "response.refusal.delta",
)


def event(kind: str, seq: int, named: bool = True, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, "sequence_number": seq, **fields}, separators=(",", ":")).encode()
    return (f"event: {kind}\n".encode() if named else b"") + b"data: " + data + b"\n\n"


def delta(kind: str, seq: int, text: str, output_index: int = 0, named: bool = True) -> bytes:
    return event(kind, seq, named, item_id=f"it_{output_index}", output_index=output_index, delta=text)


def stream(items: list[tuple[str, list[str]]], named: bool = True) -> list[bytes]:
    """created, then per output item: added, its deltas, done; then completed with usage."""
    out = [event("response.created", 0, named, response={"id": "r", "status": "in_progress", "model": "m"})]
    seq = 1
    for index, (kind, texts) in enumerate(items):
        typ = "function_call" if kind == "response.function_call_arguments.delta" else "message"
        item = {"type": typ, "id": f"it_{index}", "call_id": f"call_{index}", "name": "f", "arguments": ""}
        out.append(event("response.output_item.added", seq, named, output_index=index, item=item))
        seq += 1
        for text in texts:
            out.append(delta(kind, seq, text, index, named))
            seq += 1
    usage = {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
    final = {"id": "r", "status": "completed", "model": "m", "output": [], "usage": usage}
    out.append(event("response.completed", seq, named, response=final))
    return out


def parsed(chunks: list[bytes], runs: bool) -> ParsedExchange:
    record = exchange(
        id="x",
        request={"method": "POST", "path": "/v1/responses", "body": b"{}"},
        response={
            "status": 200,
            "streamed": True,
            "chunks": chunks,
            "chunk_us": [7 + i % 5 for i in range(len(chunks))],
        },
    )
    with pytest.MonkeyPatch.context() as mp:
        if not runs:
            mp.setattr(parse_responses, "response_run", lambda reads: None)
        return parse_exchange(record)


def assert_same(chunks: list[bytes]) -> None:
    fast, slow = parsed(chunks, True), parsed(chunks, False)
    for field in dataclasses.fields(ParsedExchange):
        assert getattr(fast, field.name) == getattr(slow, field.name), field.name


TEXT = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(["", " a", 'q"\\', "\u00e9\u4e2d", "\n\t"])


def damage(chunks: list[bytes], data: st.DataObject) -> list[bytes]:
    """One or two changes anywhere: a byte changed, a sequence jump, invalid UTF-8, CRLF framing, a BOM, another
    event inside, a read split, an empty read, a `data:` line without its `event:` line."""
    out = list(chunks)
    for _ in range(data.draw(st.integers(0, 2))):
        at = data.draw(st.integers(0, len(out) - 1))
        how = data.draw(st.integers(0, 9))
        read = out[at]
        if how == 0 and read:
            pos = data.draw(st.integers(0, len(read) - 1))
            out[at] = read[:pos] + bytes([data.draw(st.integers(0, 255))]) + read[pos + 1 :]
        elif how == 1:
            out[at] = read.replace(b'"sequence_number":', b'"sequence_number":9', 1)
        elif how == 2:
            out[at] = read.replace(b'"delta":"', b'"delta":"\xff\xfe', 1)
        elif how == 3:
            out[at] = read.replace(b"\n", b"\r\n")
        elif how == 4:
            out.insert(at, b"\xef\xbb\xbf")
        elif how == 5:
            out.insert(at, event("response.output_text.delta", 5, delta="x", output_index=7, response={"model": "z"}))
        elif how == 6 and len(read) > 1:
            cut = data.draw(st.integers(1, len(read) - 1))
            out[at : at + 1] = [read[:cut], read[cut:]]
        elif how == 7:
            out.insert(at, b"")
        elif how == 8:
            out[at] = read.split(b"\n", 1)[-1] if read.startswith(b"event: ") else read
        else:
            out[at] = read.replace(b'"sequence_number":', b'"sequence_number":0', 1)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(DELTAS), st.lists(TEXT, min_size=0, max_size=24)), min_size=1, max_size=3),
    st.booleans(),
    st.data(),
)
def test_a_run_parses_as_its_events(items: list[tuple[str, list[str]]], named: bool, data: st.DataObject) -> None:
    assert_same(damage(stream(items, named), data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(DELTAS), st.lists(TEXT, min_size=0, max_size=24)), min_size=1, max_size=3),
    st.booleans(),
    st.sampled_from(KINDS),
    st.integers(0, 1 << 16),
    st.data(),
)
def test_an_obfuscated_run_parses_as_its_events(
    items: list[tuple[str, list[str]]], named: bool, how: str, seed: int, data: st.DataObject
) -> None:
    # OpenAI's `obfuscation` on every event (random characters; with escapes; missing from one; its key twice).
    assert_same(damage(obfuscate(stream(items, named), how, seed), data))


def test_an_obfuscated_stream_is_folded_as_a_paired_run() -> None:
    texts = [f" w{i}" for i in range(40)]
    for kind in ("response.output_text.delta", "response.function_call_arguments.delta"):
        chunks = obfuscate(stream([(kind, texts)]), "random", 3)
        found = response_run(chunks)
        assert found is not None and found[0].rest == b',"obfuscation":' and found[0].values == texts
        assert_same(chunks)
    # A second string that the event keeps (here `item_id`, after the delta) is no paired run.
    kind = "response.output_text.delta"
    kept = [
        event(kind, 3 + i, output_index=0, delta=t, item_id=f"it_{i}")
        for i, t in enumerate([f" w{i}" for i in range(40)])
    ]
    assert find_run(kept, f"event: {kind}\ndata: ".encode(), b"\n\n", numbered=True) is not None
    assert response_run(kept) is None
    assert_same(kept)


def test_the_benchmark_shape_is_folded_as_a_run() -> None:
    texts = [f" w{i}" for i in range(40)]
    chunks = stream([("response.output_text.delta", texts), ("response.function_call_arguments.delta", texts)])
    found = response_run(chunks)
    assert found is not None and found[1].type in {
        "response.output_text.delta",
        "response.function_call_arguments.delta",
    }
    fast = parsed(chunks, True)
    assert fast.content == "".join(texts) and fast.tool_calls[0].arguments == "".join(texts)
    assert fast.findings == parsed(chunks, False).findings == ["invalid_tool_json"]  # the arguments are no JSON


def reads(texts: list[str]) -> list[bytes]:
    return [delta("response.output_text.delta", 10 + i, t) for i, t in enumerate(texts)]


@pytest.mark.parametrize("change", [(b"}\n\n", b"}\n\n\n"), (b'"type"', b'"typf"'), (b"event: r", b"event: s")])
def test_a_read_one_byte_off_is_left_out(change: tuple[bytes, bytes]) -> None:
    chunks = reads([f"t{i}" for i in range(30)])
    chunks[20] = chunks[20].replace(*change)
    run = find_run(chunks, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True)
    assert run is not None and (run.start, run.end) == (0, 20) and run.values == [f"t{i}" for i in range(20)]


def test_a_read_off_between_its_holes_gives_no_run() -> None:
    chunks = reads([f"t{i}" for i in range(30)])
    chunks[20] = chunks[20].replace(b'"output_index":0', b'"output_index":1')
    assert find_run(chunks, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True) is None


@pytest.mark.parametrize(
    ("middle", "why"),
    [
        (b'"a","b"', "two strings in one middle"),
        (b'"a"\n', "a line break after the string"),
        (b"12", "no string"),
    ],
)
def test_a_middle_that_is_not_one_string_gives_no_run(middle: bytes, why: str) -> None:
    chunks = reads([f"t{i}" for i in range(30)])
    chunks[15] = chunks[15].replace(b'"t15"', middle)
    run = find_run(chunks, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True)
    assert run is None or not run.start <= 15 < run.end, why
    assert_same(stream([("response.output_text.delta", [f"t{i}" for i in range(30)])]))


@pytest.mark.parametrize("number", [b"015", b"-15", b"1.5", b" 15", b""])
def test_an_integer_that_is_not_plain_digits_is_left_out(number: bytes) -> None:
    chunks = reads([f"t{i}" for i in range(30)])
    chunks[15] = chunks[15].replace(b'"sequence_number":25', b'"sequence_number":' + number)
    run = find_run(chunks, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True)
    assert run is None or not run.start <= 15 < run.end


def test_a_sequence_jump_stays_in_the_run() -> None:
    chunks = reads([f"t{i}" for i in range(30)])
    chunks[15] = chunks[15].replace(b'"sequence_number":25', b'"sequence_number":4000')
    run = find_run(chunks, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True)
    assert run is not None and (run.start, run.end) == (0, 30)


def test_a_chat_string_with_a_line_break_after_it_gives_no_run() -> None:
    chunks = [b'data: {"choices":[{"index":0,"delta":{"content":"t%d"}}]}\n\n' % i for i in range(30)]
    chunks[15] = chunks[15].replace(b'"t15"', b'"t15"\n')
    run = find_run(chunks, b"data: ", b"\n\n")
    assert run is None or not run.start <= 15 < run.end


@pytest.mark.parametrize("empties", [0, 3])
def test_a_bom_after_the_run_is_read_as_the_whole_stream_reads_it(empties: int) -> None:
    chunks = stream([("response.output_text.delta", [f"t{i}" for i in range(30)])], named=False)
    chunks[-1:-1] = [b""] * empties + [b"\xef\xbb\xbf"]
    assert response_run(chunks) is not None
    assert_same(chunks)


@pytest.mark.parametrize("low", [0, 5, 95, 995, 99_990])
def test_sequence_numbers_that_count_up_across_a_change_of_width_are_one_run(low: int) -> None:
    texts = [f"t{i}" for i in range(20)]
    chunks = [delta("response.output_text.delta", low + i, t) for i, t in enumerate(texts)]
    with pytest.MonkeyPatch.context() as mp:  # proved by the count alone: the general proof is not needed
        mp.setattr(event_runs, "numbered_middles", None)
        run = find_run(chunks, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True)
    assert run is not None and (run.start, run.end) == (0, 20) and run.values == texts
    # Written as JSON would not write them (a leading zero, a space), or past the count's bound: no longer counted,
    # and the general proof leaves the odd read out or finds no run.
    for spoiled in (b"0", b" "):
        odd = list(chunks)
        odd[12] = odd[12].replace(b'"sequence_number":', b'"sequence_number":' + spoiled, 1)
        run = find_run(odd, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True)
        assert run is None or 12 not in range(run.start, run.end), spoiled
    assert_same(stream([("response.output_text.delta", [f"w{i}" for i in range(120)])]))  # from 2 to 121


def test_a_count_past_the_bound_takes_the_general_proof() -> None:
    texts = [f"t{i}" for i in range(20)]
    # A hostile stream's numbers cannot make the table of decimals grow past the bound (999,990 would be 60 MB).
    chunks = [delta("response.output_text.delta", 999_990 + i, t) for i, t in enumerate(texts)]
    run = find_run(chunks, b"event: response.output_text.delta\ndata: ", b"\n\n", numbered=True)
    assert run is not None and run.values == texts and len(run_proofs._DECIMALS) <= 2 * MAX_COUNTED


def test_reads_that_hold_several_events_are_folded_as_a_run() -> None:
    events = stream([("response.output_text.delta", [f"w{i}" for i in range(60)])])
    reads = [events[0], *(b"".join(events[i : i + 3]) for i in range(1, len(events), 3))]
    found = response_run(reads)
    assert found is not None and found[0].held is not None
    assert_same(reads)


def test_a_run_whose_last_event_is_cut_across_the_reads_before_the_final_event_ends_before_it() -> None:
    events = stream([("response.output_text.delta", [f"w{i}" for i in range(60)])])
    reads = [events[0], *(b"".join(events[i : i + 3]) for i in range(1, len(events) - 3, 3))]
    last = b"".join(events[len(events) - 3 :])  # the last two deltas and the completed event
    reads += [last[:20], last[20:]]  # the second to last delta cut across two reads
    found = response_run(reads)
    assert found is not None and found[0].end <= len(reads) - 2
    assert_same(reads)
