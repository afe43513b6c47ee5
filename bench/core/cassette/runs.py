"""Runs, as readers see them: a run recorded by `bench proxy --workers N` is N shards, each worker's cassettes
(header `shard`, docs/cassette-format.md), and every reader treats them as one run, its exchanges in start order.

A shard's cassettes are named `<run>-w<K>.cassette` (rotated: `<run>-w<K>-<n>.cassette`), so the files of a run are
found by name alone, without opening any (on object storage, opening is a download). A local file whose name says
shard is also checked to say so in its header. Any other cassette is a run of its own, as it always was.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.core.cassette.format import SUFFIX
from bench.core.cassette.reader import CassetteReader
from bench.core.cassette.records import Exchange, Shard
from bench.core.errors import CassetteError
from bench.core.storage import Location, is_url

_SHARD_NAME = re.compile(r"^(?P<run>.+)-w(?P<worker>\d{1,4})(?:-(?P<n>\d{5,}))?" + re.escape(SUFFIX) + "$")


@dataclass(frozen=True)
class RunFiles:
    """One run's cassettes: a cassette alone, or a sharded run's, by worker and then in rotation order."""

    files: tuple[Location, ...]

    @property
    def first(self) -> Location:
        return self.files[0]


def shard_of_name(location: Location) -> tuple[str, int, int] | None:
    """(folder/run, worker, rotation) from a shard's file name; None for any other name."""
    text = str(location)
    folder, _, name = text.rpartition("/")
    m = _SHARD_NAME.match(name)
    if m is None:
        return None
    return f"{folder}/{m.group('run')}", int(m.group("worker")), int(m.group("n") or -1)


def group_runs(files: Sequence[Location]) -> list[RunFiles]:
    """The cassettes grouped into runs, each run where its first file was in `files`: the shards of a run together
    (by worker, then rotation), every other cassette a run of its own."""
    keyed: dict[str, list[tuple[int, int, Location]]] = {}
    order: list[str | Location] = []
    for location in files:
        named = shard_of_name(location)
        if named is not None and _says_shard(location, named[0]):
            run, worker, n = named
            if run not in keyed:
                keyed[run] = []
                order.append(run)
            keyed[run].append((worker, n, location))
        else:
            order.append(location)
    out: list[RunFiles] = []
    for item in order:
        if isinstance(item, str) and item in keyed:
            out.append(RunFiles(tuple(loc for _, _, loc in sorted(keyed[item], key=lambda x: (x[0], x[1])))))
        else:
            out.append(RunFiles((item,)))
    return out


def _says_shard(location: Location, run: str) -> bool:
    """A local file named as a shard is one only if its header says so (a URL is taken by its name: opening it would
    download it); a file that cannot be read stays in its run, where its reader reports it."""
    if is_url(location):
        return True
    try:
        shard = CassetteReader(location).header.shard
    except CassetteError:
        return True
    return isinstance(shard, Shard) and shard.run == Path(run).name


def in_start_order(streams: Sequence[Iterable[Exchange]]) -> Iterator[tuple[int, Exchange]]:
    """(stream index, record) of several cassettes' records merged by start: each cassette's own order is kept (it
    holds its exchanges in the order they ended), the cassettes interleaved by the start of each one's next record,
    ties by stream. A run's records then come as one cassette recording them all would have held them."""

    def keyed(i: int, stream: Iterable[Exchange]) -> Iterator[tuple[int, int, Exchange]]:
        for record in stream:
            yield record.started, i, record

    for _, i, record in heapq.merge(*(keyed(i, s) for i, s in enumerate(streams)), key=lambda x: (x[0], x[1])):
        yield i, record
