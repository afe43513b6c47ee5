"""Proofs that reads are a run's template with its holes filled (bench.core.run_proofs): a paired run's strings
moved across its `rest`, or a `rest` that could take the separator, are no run (find_run's own cases:
tests/bench/core/test_event_runs.py)."""

from __future__ import annotations

import random

from bench.core.event_runs import find_run
from bench.core.run_proofs import _paired_strings
from tests.bench.core.test_event_runs import HEAD, REST, TAIL, obfuscated
from tests.support.obfuscation import obfuscation


def test_strings_moved_across_rests_give_no_paired_run() -> None:
    # The counts come out right (twice as many strings as reads, one `rest` a read) only with the line breaks.
    rng = random.Random(3)
    reads = [obfuscated(f"t{i}", obfuscation(rng)) for i in range(30)]
    front = b'data: {"id":"c","delta":{"content":'
    # One read without `rest`, another with it twice: as many strings and CRs, but not one of each a read.
    reads[5], reads[6] = front + b'"a"}\n\n', front + b'"b"' + REST + b'"c"' + REST + b'"d"}\n\n'
    assert find_run(reads, HEAD, TAIL) is None
    assert _paired_strings(REST, [b'"a"', b'"b"' + REST + b'"c"' + REST + b'"d"']) is None
    assert _paired_strings(REST, [b'"b"' + REST + b'"c"' + REST + b'"d"', b'"a"']) is None
    # Two strings around a raw CR (JSON whitespace), no `rest`: one CR, two strings, as a paired read has. Such a
    # read is left out of the run (it does not hold `rest`); the proof itself refuses it too.
    reads = [obfuscated(f"t{i}", obfuscation(rng)) for i in range(30)]
    reads[5] = front + b'"a",\r"b"}\n\n'
    run = find_run(reads, HEAD, TAIL)
    assert run is not None and (run.start, run.end) == (6, 30)
    assert _paired_strings(REST, [b'"a",\r"b"', b'"c"' + REST + b'"d"']) is None
    assert _paired_strings(REST, [b'"a" ' + REST + b'\t"b"', b'"c"' + REST + b'"d"']) == ["a", "c"]


def test_a_rest_that_could_take_the_bytes_between_middles_gives_no_paired_run() -> None:
    # `rest` = `},` could take the comma between two middles: a read of one string and a read of three would pass
    # the counts. Such a shape is refused.
    reads = [b'data: [{"t":"t%d"},"o%d"]\n\n' % (i, i) for i in range(30)]
    assert find_run(reads, HEAD, TAIL) is None
    assert _paired_strings(b"},", [b'"a"}', b'"b"},"c","d"']) is None
    # A `rest` holding a line break could take the LF between two middles, and a middle's own LF stand in for it.
    assert _paired_strings(b"x,\ny", [b'"a"x', b'y"b",\n"c"x,\ny"d"']) is None
    assert _paired_strings(b"},", [b'"a"},"o"', b'"b"},"p"']) is None
