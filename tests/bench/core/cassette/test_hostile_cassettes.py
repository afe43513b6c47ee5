"""Issue 31's hostile cassettes: valid framing and checksums around values no bench writes. Each record outside the
bounds of docs/cassette-format.md ("Bounds") is skipped and counted in one line, its neighbours are read, and
nothing raises, hangs or grows past the stated memory bound."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import MAX_NAME, MAX_SPAN_US, MAX_TIME_US
from bench.core.cassette.seek import SeekIndex
from bench.scorer.scores_io import read_scores
from tests.support import hostile_cassettes as hc

N = len(hc.exchange_map("x")["response"]["chunks"])  # reads of the exchanges below: one time each


def read(path: Path) -> tuple[list[str], str | None]:
    reader = CassetteReader(path)
    return [x.id for x in reader], reader.problem


def with_good_neighbours(tmp_path: Path, bad: bytes) -> Path:
    good = hc.payload(hc.exchange_map("before"), [5] * N)
    after = hc.payload(hc.exchange_map("after", epoch="1"), [5] * N)
    return hc.write(tmp_path / "h.cassette", [good, bad, after])


def _with(field: str, value: object, id: str = "bad") -> dict[str, object]:
    doc = hc.exchange_map(id)
    where: dict[str, object] = doc
    *path, last = field.split(".")
    for key in path:
        where = where[key]  # type: ignore[assignment]
    where[last] = value
    return doc


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("started", MAX_TIME_US + 1, "<= 253402300799999999"),  # year 10000 and after: no datetime holds it
        ("started", 2**63 - 1, "<= 253402300799999999"),
        ("started", -5, ">= 0"),
        ("timing.end", MAX_SPAN_US + 1, f"<= {MAX_SPAN_US}"),
        ("timing.first_token", -1000, ">= 0"),
        ("response.raw_bytes", -1, ">= 0"),
        ("response.status", 10**6, "<= 999"),
        ("tags.model", "m" * (MAX_NAME + 1), f"length <= {MAX_NAME}"),
        ("upstream.model", "M" * (50 << 20), f"length <= {MAX_NAME}"),  # a 50 MB name is never kept
        ("error", "E" * (1 << 20), "length <= 65536"),
    ],
)
def test_a_value_out_of_bounds_is_one_malformed_record(tmp_path: Path, field: str, value: object, says: str) -> None:
    path = with_good_neighbours(tmp_path, hc.payload(_with(field, value), [5] * N))
    ids, problem = read(path)
    assert ids == ["before", "after"]
    assert problem is not None and "1 malformed record(s) skipped" in problem and says in problem, problem


@pytest.mark.parametrize(
    ("times", "says"),
    [
        ([-1_000_000] * N, "not a time from 0"),  # negative times: E2EL -1000 ms before
        ([2**62] * N, "not a time from 0"),
        ([5, 5], f"2 arrival time(s) for {N} read(s)"),  # fewer times than reads: IndexError before
        ([5] * (N + 2), f"{N + 2} arrival time(s) for {N} read(s)"),
    ],
)
def test_times_out_of_bounds_or_not_one_per_read_are_one_malformed_record(
    tmp_path: Path, times: list[int], says: str
) -> None:
    path = with_good_neighbours(tmp_path, hc.payload(hc.exchange_map("bad"), times, as_list=True))
    ids, problem = read(path)
    assert ids == ["before", "after"] and problem is not None and says in problem, problem


def test_deep_msgpack_is_one_malformed_record_and_its_neighbour_is_still_found(tmp_path: Path) -> None:
    # An unknown field 200k levels deep: msgspec skips unknown fields recursively (RecursionError, a 500 in the view).
    doc = msgpack_map_with(hc.exchange_map("bad"), "junk", hc.deep_msgpack(200_000))
    path = with_good_neighbours(tmp_path, hc.payload(doc, [5] * N))
    ids, problem = read(path)
    assert ids == ["before", "after"] and problem is not None and "nested too deep" in problem
    found = SeekIndex(path).read(["after"])  # what `bench view` does to show one exchange
    assert list(found) == ["after"]


def msgpack_map_with(doc: dict[str, object], key: str, packed_value: bytes) -> bytes:
    """`doc` packed with one more key whose value is already packed (too deep for msgpack to pack for us)."""
    import msgpack

    body = msgpack.packb(doc)
    assert body[0] & 0xF0 == 0x80 and len(doc) < 15  # a fixmap: its count is in the first byte
    return bytes([body[0] + 1]) + body[1:] + msgpack.packb(key) + packed_value


def test_cassette_show_and_export_skip_what_is_out_of_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = with_good_neighbours(tmp_path, hc.payload(_with("started", 2**62), [5] * N))
    for command in (["cassette", "show", str(path)], ["cassette", "export", str(path)]):
        assert main(command) == 0
        captured = capsys.readouterr()
        assert "1 malformed record(s) skipped" in captured.err and len(captured.err.splitlines()) == 1
    assert '"id":"after"' in captured.out.replace(" ", "")  # the export holds the neighbour


BOMB_BYTES = 6 << 30  # 6 GiB of zeros from ~190 KB of RLE blocks


def test_a_decompression_bomb_is_refused_in_one_line_with_bounded_memory(tmp_path: Path) -> None:
    path = hc.bomb(tmp_path / "bomb.cassette", BOMB_BYTES)
    assert path.stat().st_size < 200_000
    # A fresh process with its address space capped: an unbounded reader would fail to allocate (or be killed).
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))\n"
        "from bench.cli import main\n"
        f"sys.exit(main(['cassette', 'ls', {str(path)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    lines = done.stdout.splitlines()  # `ls` says a file's problem on its own line
    assert len(lines) == 1 and "decompression bomb" in lines[0], done.stdout


LIMIT = 2 << 30  # a bench process's address space (the interpreter and its libraries map ~1 GiB) plus the bound


def test_rescore_goes_on_past_a_bomb_and_every_hostile_record(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    hc.bomb(folder / "a-bomb.cassette", 1 << 30)
    bad = [
        hc.payload(_with("started", 2**62, id="h1"), [5] * N),
        hc.payload(hc.exchange_map("h2"), [-1] * N, as_list=True),
    ]
    hc.write(folder / "b-hostile.cassette", bad)
    deep = hc.exchange_map("deep", "[" * 200_000 + "]" * 200_000, test="json.person_object")
    deep_times = [5] * len(deep["response"]["chunks"])
    hc.write(folder / "c-good.cassette", [hc.payload(hc.exchange_map("good"), [5] * N), hc.payload(deep, deep_times)])
    out = tmp_path / "scores.jsonl"
    assert main(["rescore", str(folder), "--jobs", "1", "--out", str(out)]) == 0
    _, results = read_scores(out)
    by_test = {r.test: r for r in results}
    assert set(by_test) == {"math.ages", "json.person_object"} and by_test["math.ages"].passed
    deep_result = by_test["json.person_object"]  # 200k deep: RecursionError once aborted the whole rescore
    assert deep_result.score == 0.0 and any("nested" in c.detail for c in deep_result.checks)


def test_the_memory_bound_holds_in_this_process_too(tmp_path: Path) -> None:
    # Resident memory grows by less than the bound while 1 GiB decompresses (in-process, as `bench view` reads).
    path = hc.bomb(tmp_path / "bomb.cassette", 1 << 30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ids, problem = read(path)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert ids == [] and problem is not None and "decompression bomb" in problem
    assert grown_kib < 200 << 10, f"{grown_kib} KiB"


def test_json_of_the_reader_problem_stays_one_line(tmp_path: Path) -> None:
    path = with_good_neighbours(tmp_path, hc.payload(_with("tags.model", "x\ny" * 3000), [5] * N))
    _, problem = read(path)
    assert problem is not None and "\n" not in problem and len(json.dumps(problem)) < 2000


def test_names_an_answer_gives_itself_are_kept_short(tmp_path: Path) -> None:
    # The upstream's words (its model name, a tool's name) from a 5 MB event: a report showed them in every table.
    import orjson

    from bench.scorer.synth import exchange_record

    event = {"model": "M" * (5 << 20), "choices": [{"index": 0, "delta": {"content": "Answer: 13"}}]}
    stop = {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "S" * (1 << 20)}]}
    chunks = [b"data: " + orjson.dumps(e) + b"\n\n" for e in (event, stop)] + [b"data: [DONE]\n\n"]
    doc = msgspec_map(exchange_record(chunks, id="big", tags=hc.TAGS))
    out = tmp_path / "scores.jsonl"
    assert main(["rescore", str(hc.write(tmp_path / "n.cassette", [hc.payload(doc, [5] * 3)])), "--out", str(out)]) == 0
    _, results = read_scores(out)
    assert [len(r.served_model or "") for r in results] == [256] and out.stat().st_size < 100_000


def msgspec_map(record: object) -> dict[str, object]:
    import msgpack
    import msgspec

    doc: dict[str, object] = msgpack.unpackb(msgspec.msgpack.encode(record))
    doc["response"].pop("chunk_us", None)  # type: ignore[attr-defined]
    return doc
