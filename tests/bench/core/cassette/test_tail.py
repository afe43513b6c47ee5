"""Following a cassette while the real writer records it: each exchange once, in order, across frames, through the
closing recompression, a new recording under the same name, and damage."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.format import SEGMENT_BYTES
from bench.core.cassette.tail import CassetteTail
from bench.scorer.synth import exchange_record, sse_chunks


def _record(i: int, size: int = 0) -> object:
    text = f"answer {i} " + "x" * size
    return exchange_record(sse_chunks(text, piece=4096), id=f"x{i}")


def _next(tail: CassetteTail, want: int) -> list[str]:
    """Polls until `want` new exchanges came (bounded: only a broken tail or writer waits a minute)."""
    got: list[str] = []
    deadline = time.monotonic() + 60
    while len(got) < want and time.monotonic() < deadline:
        got += [x.id for x in tail.poll()]
        if len(got) < want:
            time.sleep(0.01)
    return got


def test_each_exchange_comes_once_as_it_is_written_across_frames_and_the_close(tmp_path: Path) -> None:
    path = tmp_path / "live.cassette"
    writer = CassetteWriter(path)
    tail = CassetteTail(path, frames_at_once=2)
    seen: list[str] = []
    # ~300 KiB answers: a frame ends every ~13 records, so the file holds several finished frames and one growing.
    big = 300 * 1024
    n = 2 * SEGMENT_BYTES // big + 5
    for i in range(n):
        writer.put(_record(i, big))  # type: ignore[arg-type]
        seen += _next(tail, 1)
        assert tail.poll() == []  # nothing twice
    assert seen == [f"x{i}" for i in range(n)]
    before = os.stat(path).st_ino
    writer.close()  # recompressed and renamed over: the same records, numbered the same
    assert os.stat(path).st_ino != before
    deadline = time.monotonic() + 60
    while tail.end is None and time.monotonic() < deadline:
        assert tail.poll() == []  # read again from the top, a few frames a poll: only the end record is new
    assert tail.end is not None and tail.end.exchanges == n and not tail.problems
    assert [x.id for x in CassetteReader(path)] == seen  # read whole, the file holds what the tail returned


def test_a_tail_started_late_reads_what_is_there_over_several_polls(tmp_path: Path) -> None:
    path = tmp_path / "done.cassette"
    with CassetteWriter(path) as writer:
        for i in range(40):
            writer.put(_record(i, 200 * 1024))  # type: ignore[arg-type]
    tail = CassetteTail(path, frames_at_once=1)
    first = tail.poll()
    assert 0 < len(first) < 40  # bounded work per poll
    rest = _next(tail, 40 - len(first))
    assert [x.id for x in first] + rest == [f"x{i}" for i in range(40)]
    assert tail.poll() == [] and tail.end is not None


def test_a_new_recording_under_the_same_name_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "again.cassette"
    with CassetteWriter(path) as writer:
        writer.put(_record(0))  # type: ignore[arg-type]
    tail = CassetteTail(path)
    assert _next(tail, 1) == ["x0"]
    path.unlink()
    time.sleep(0.002)  # another creation time in the header (microseconds)
    with CassetteWriter(path) as writer:
        for i in (7, 8):
            writer.put(_record(i))  # type: ignore[arg-type]
    assert _next(tail, 2) == ["x7", "x8"]


def test_damage_is_skipped_and_said_and_the_records_after_it_come(tmp_path: Path) -> None:
    path = tmp_path / "damaged.cassette"
    writer = CassetteWriter(path, compact_on_close=False)
    tail = CassetteTail(path)
    for i in range(3):
        writer.put(_record(i, SEGMENT_BYTES // 2))  # type: ignore[arg-type]
    assert _next(tail, 3) == ["x0", "x1", "x2"]
    writer.close()
    tail.poll()
    with path.open("ab") as fh:  # junk after the last frame (not a writer's bytes)
        fh.write(b"\x00junk" * 100)
    assert tail.poll() == []
    assert tail.problems and "skipped" in tail.problems[-1]
