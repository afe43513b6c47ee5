"""A run of reads that differ only in one JSON string: what is in it, what is left out, and when there is none."""

from __future__ import annotations

import json
import random
from itertools import pairwise

import pytest

from bench.core.event_runs import find_run
from bench.core.run_proofs import MIN_RUN
from tests.support.obfuscation import obfuscation

HEAD, TAIL = b"data: ", b"\n\n"


def read(value: str, before: str = '{"id":"c","delta":{"content":', after: str = '},"finish_reason":null}') -> bytes:
    return HEAD + before.encode() + json.dumps(value).encode() + after.encode() + TAIL


def test_a_run_holds_every_read_of_the_shape_and_decodes_each_string() -> None:
    tokens = [" a", 'b"c', "\\", "é", "", "\u2028", " x", "y", '"', "\n", "z"]
    reads = [b"data: first\n\n", *map(read, tokens), b"data: [DONE]\n\n"]
    run = find_run(reads, HEAD, TAIL)
    assert run is not None and (run.start, run.end) == (1, len(tokens) + 1)
    assert run.values == tokens
    # The template with another string in the hole is a read of the same shape.
    assert run.template(b'"q"') == read("q") and run.template(b'"q"', len(HEAD), len(TAIL)) == read("q")[6:-2]


def test_a_read_one_byte_off_ends_the_run_there() -> None:
    tokens = [f"t{i}" for i in range(30)]
    reads = list(map(read, tokens))
    reads[20] = reads[20].replace(b'"finish_reason":null', b'"finish_reason":nul ')
    run = find_run(reads, HEAD, TAIL)
    assert run is not None and (run.start, run.end) == (0, 20) and run.values == tokens[:20]


def test_a_middle_holding_two_strings_or_a_split_string_gives_no_run() -> None:
    tokens = [f"t{i}" for i in range(30)]
    for bad in (b'"a","b"', b'"a",\n"b"', b'"a'):
        reads = list(map(read, tokens))
        reads[3] = read("x").replace(b'"x"', bad)
        # Read 3 is in the run's bytes by its prefix and suffix, but its middle is not one string: no run at all.
        assert find_run(reads, HEAD, TAIL) is None, bad
    # Two middles that are one string only together (an escaped quote, then the rest), and a third holding two
    # strings, so that the count comes out right: the LF between middles ends the first string, no run.
    reads = list(map(read, tokens))
    reads[3], reads[4] = read("x").replace(b'"x"', b'"a\\"'), read("x").replace(b'"x"', b'"')
    reads[5] = read("x").replace(b'"x"', b'"b","c"')
    assert find_run(reads, HEAD, TAIL) is None


def test_no_run_without_a_string_hole_or_with_shared_bytes_a_run_does_not_cover() -> None:
    same = [read("same")] * 30
    assert find_run(same, HEAD, TAIL) is None  # no two reads differ
    assert find_run(list(map(read, map(str, range(MIN_RUN - 1)))), HEAD, TAIL) is None  # too short to pay
    numbers = [HEAD + f'{{"n":{i}}}'.encode() + TAIL for i in range(30)]
    assert find_run(numbers, HEAD, TAIL) is None  # the reads differ, but not in a string
    for before in ('{"model":"é","delta":{"content":', '{"a":"\\r","delta":{"content":'):
        reads = [read(f"t{i}", before=before) for i in range(30)]
        if before.isascii():
            reads = [r.replace(b"\\r", b"\r") for r in reads]  # a raw CR in the shared bytes
        assert find_run(reads, HEAD, TAIL) is None, before
    assert find_run([read(f"t{i}")[:-1] for i in range(30)], HEAD, TAIL) is None  # not framed by `tail`


def obfuscated(value: str, other: bytes) -> bytes:
    """A read as OpenAI sends it: the token, then random characters (`obfuscation`) as the object's last field."""
    return read(value, after='},"finish_reason":null,"obfuscation":' + other.decode() + "}")


REST = b'},"finish_reason":null,"obfuscation":'


def test_reads_that_differ_in_two_strings_are_a_paired_run() -> None:
    # OpenAI adds random characters (`obfuscation`) to every delta event by default: two strings differ per read.
    rng = random.Random(5)
    tokens = [" a", 'b"c', "\\", "é", "", "\u2028", " x", "y", '"', "z", "q", "r"]
    others = [obfuscation(rng, escapes=i % 2 == 1) for i in range(len(tokens))]
    reads = [b"data: first\n\n", *map(obfuscated, tokens, others), b"data: [DONE]\n\n"]
    run = find_run(reads, HEAD, TAIL)
    assert run is not None and (run.start, run.end) == (1, len(tokens) + 1)
    assert run.values == tokens and run.rest == REST
    assert run.template(b'"q"', other=b'"o"') == obfuscated("q", b'"o"')


def test_a_read_without_the_second_string_ends_the_paired_run_there() -> None:
    rng = random.Random(1)
    tokens = [f"t{i}" for i in range(30)]
    reads = [obfuscated(t, obfuscation(rng)) for t in tokens]
    reads[20] = read("t20", after='},"finish_reason":null}')
    run = find_run(reads, HEAD, TAIL)
    assert run is not None and (run.start, run.end) == (0, 20) and run.values == tokens[:20]


@pytest.mark.parametrize(
    "middle",
    [
        b'"a"' + REST + b'"o"' + REST + b'"p"',  # the key twice: a third string
        b'"a"' + REST + b"12",  # the second hole not a string
        b'"a"' + REST + b'"o',  # a split string
        b'"a","x"' + REST + b'"o"',  # a string too many before `rest`
        b'"a"' + REST + b'"o","x"',  # and after it
        b'"a"' + REST + b'"o"\n',  # a line break after the string
        b'"a"' + REST + b'"\xff"',  # not UTF-8
    ],
)
def test_a_middle_that_is_not_two_strings_around_rest_gives_no_paired_run(middle: bytes) -> None:
    rng = random.Random(2)
    reads = [obfuscated(f"t{i}", obfuscation(rng)) for i in range(30)]
    reads[5] = b'data: {"id":"c","delta":{"content":' + middle + b"}\n\n"
    assert find_run(reads, HEAD, TAIL) is None


def test_events_several_in_a_read_or_cut_across_reads_are_a_run_timed_by_the_read_that_ends_them() -> None:
    tokens = [f"t{i}" for i in range(30)]
    events = list(map(read, tokens))
    # Reads as a proxy gets them from a fast server: two events in one read, one event cut in two, the rest alone.
    reads = [*events[:10], events[10] + events[11], events[12][:40], events[12][40:], *events[13:]]
    run = find_run(reads, HEAD, TAIL)
    assert run is not None and run.values == tokens and (run.start, run.end) == (0, len(reads))
    times = [100 * i for i in range(len(reads))]
    later, values = run.bulk(times)
    assert values == tokens[1:]
    # Event 10 and 11 end in read 10; event 12 in read 12 (its second half); event 13 in read 13.
    assert later[9:13] == [1000, 1000, 1200, 1300] and later[:9] == times[1:10]
    # The run's first read must end where an event ends (it is parsed with the reads before the run).
    cut_first = [events[0] + events[1][:30], events[1][30:], *events[2:]]
    run = find_run(cut_first, HEAD, TAIL)
    assert run is None or run.start >= 1
    # The last read must end an event: a stream cut inside the run's last event is no run of the whole.
    cut_last = [*events[:-1], events[-1][:-1]]
    run = find_run(cut_last, HEAD, TAIL)
    assert run is None or run.end < len(cut_last)


def test_coalesced_reads_that_start_or_end_inside_an_event() -> None:
    tokens = [f"t{i}" for i in range(40)]
    data = b"".join(map(read, tokens))
    # Every read holds several events and starts and ends inside one (cut 30 bytes into an event): the shape is
    # taken from the whole events inside a read, not from its cut first piece.
    size = len(read("t10"))
    cuts = [0, *(30 + size * k for k in range(3, 40, 3)), len(data)]
    reads = [data[a:b] for a, b in pairwise(cuts)]
    run = find_run(reads, HEAD, TAIL)
    assert run is not None and run.values == tokens
    # A first read that is one whole event, then reads that hold several and end inside one, and after the middle
    # read none that ends an event: no run (its end would cut an event in two).
    rest = data[len(read("t0")) :]
    cuts = [0, *(30 + size * k for k in range(3, 39, 3)), len(rest)]
    coalesced = [read("t0"), *(rest[a:b] for a, b in pairwise(cuts))]
    middle = len(coalesced) // 2
    tail_cut = [*coalesced[: middle + 1], *(r[:-1] + b"x" for r in coalesced[middle + 1 :])]
    assert find_run(tail_cut, HEAD, TAIL) is None
    assert find_run(coalesced, HEAD, TAIL) is not None  # whole, the same reads are a run


def test_a_paired_run_after_sequence_numbers() -> None:
    rng = random.Random(4)
    head = b"event: e\ndata: "
    reads = [
        head + b'{"sequence_number":%d,"delta":%s,"obfuscation":%s}\n\n' % (7 + i, b'"t%d"' % i, obfuscation(rng))
        for i in range(30)
    ]
    run = find_run(reads, head, TAIL, numbered=True)
    assert run is not None and (run.start, run.end) == (0, 30) and run.values == [f"t{i}" for i in range(30)]
    assert run.between == b',"delta":' and run.rest == b',"obfuscation":'
    # Numbers that do not count up take the general proof (regex on the integers), and find the same run.
    reads[10] = reads[10].replace(b":17,", b":99,")
    run = find_run(reads, head, TAIL, numbered=True)
    assert run is not None and (run.start, run.end) == (0, 30) and run.values == [f"t{i}" for i in range(30)]
