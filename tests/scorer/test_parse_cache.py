"""The parse cache (bench.scorer.parse_cache): scores byte-identical to a rescore without it, with a cold, warm, stale
(parser version bumped) and damaged cache; a second rescore reads every parse; damage, hostile entries and a file
that is no database are misses or a warning, never a crash or another score; the size bound holds; process pools,
concurrent rescores, Dask and cassettes on S3 share it; `bench cache clear` removes only its own files."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sqlite3
import subprocess
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bench.catalog.model import Catalog
from bench.core.cassette import CassetteReader, read_cassette
from bench.core.cassette.writer import CassetteWriter
from bench.core.parse import parse_exchange
from bench.scorer import parse_cache
from bench.scorer.answer_facts import AnswerFacts, answer_facts
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.rescore import Request, rescore
from bench.scorer.synth import exchange_record

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"
N_SHIPPED = sum(1 for _ in CassetteReader(SHIPPED))
# Most tests read a part of it: one epoch of the suites whose checks run no code (quick to score, every answer kind).
QUICK = ("tools", "math", "instruct", "json", "extract")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    header, records = read_cassette(SHIPPED)
    path = tmp_path_factory.mktemp("sample") / "sample.cassette"
    with CassetteWriter(path, settings=header.settings, run=header.run) as writer:
        for record in records:
            if record.tags.get("epoch") == "0" and record.tags.get("test", "").split(".")[0] in QUICK:
                writer.put(record)
    return path


@pytest.fixture(scope="module")
def n_sample(sample: Path) -> int:
    return sum(1 for _ in CassetteReader(sample))


@pytest.fixture(scope="module")
def sample_ref(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog, sample: Path) -> bytes:
    out = tmp_path_factory.mktemp("sref") / "scores.jsonl"
    rescore_to_file([sample], out, catalog=catalog, parse_cache=None)
    return out.read_bytes()


def rescore_to_file(paths: list[Any], out: Path, **kw: Any) -> None:
    rescore(Request(paths, **kw), out)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> bytes:
    """The shipped cassette's scores file, parsed without any cache: the known answer every cached run must give."""
    out = tmp_path_factory.mktemp("ref") / "scores.jsonl"
    rescore_to_file([SHIPPED], out, catalog=catalog, parse_cache=None)
    return out.read_bytes()


def scores(
    tmp: Path, catalog: Catalog, folder: Path, name: str = "scores.jsonl", path: Path = SHIPPED, **kw: Any
) -> bytes:
    out = tmp / name
    rescore_to_file([path], out, catalog=catalog, parse_cache=str(folder), **kw)
    return out.read_bytes()


def stats(folder: Path) -> parse_cache.Stats:
    handle = parse_cache.for_process(str(folder))
    assert handle is not None
    return handle.stats


def rows(folder: Path) -> int:
    with sqlite3.connect(folder / parse_cache.FILE) as db:
        count: int = db.execute("SELECT count(*) FROM parses").fetchone()[0]
    return count


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "cache"
    yield path
    parse_cache._OPEN.pop((os.getpid(), str(path)), None)


def test_cold_then_warm_same_scores_every_parse_read(
    tmp_path: Path, catalog: Catalog, reference: bytes, folder: Path
) -> None:
    assert scores(tmp_path, catalog, folder) == reference
    cold = dataclasses.replace(stats(folder))
    assert (cold.hits, cold.misses, cold.written) == (0, N_SHIPPED, N_SHIPPED)
    assert rows(folder) == N_SHIPPED
    assert scores(tmp_path, catalog, folder, "again.jsonl") == reference
    warm = stats(folder)
    assert (warm.hits - cold.hits, warm.misses - cold.misses) == (N_SHIPPED, 0)


def test_budgets_are_part_of_the_key(tmp_path: Path, catalog: Catalog, folder: Path, sample: Path) -> None:
    ref = tmp_path / "ref.jsonl"
    rescore_to_file([sample], ref, catalog=catalog, max_tokens=5)
    scores(tmp_path, catalog, folder, path=sample)  # unbudgeted entries
    assert scores(tmp_path, catalog, folder, "budget.jsonl", path=sample, max_tokens=5) == ref.read_bytes()
    assert stats(folder).hits == 0


def test_parser_version_bump_misses_every_entry(
    tmp_path: Path,
    catalog: Catalog,
    sample: Path,
    sample_ref: bytes,
    n_sample: int,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scores(tmp_path, catalog, folder, path=sample)
    monkeypatch.setattr(parse_cache, "PARSER_VERSION", parse_cache.PARSER_VERSION + 1)
    before = dataclasses.replace(stats(folder))
    assert scores(tmp_path, catalog, folder, "stale.jsonl", path=sample) == sample_ref
    after = dataclasses.replace(stats(folder))
    assert (after.hits - before.hits, after.misses - before.misses) == (0, n_sample)
    assert rows(folder) == 2 * n_sample  # the old version's entries stay until evicted (they go first)
    # The new version's entries are read from then on.
    assert scores(tmp_path, catalog, folder, "bumped.jsonl", path=sample) == sample_ref
    assert stats(folder).hits - after.hits == n_sample


def damage(folder: Path, sql: str, *args: Any) -> None:
    with sqlite3.connect(folder / parse_cache.FILE) as db:
        db.execute(sql, args)


@pytest.mark.parametrize(
    ("how", "sql", "args"),
    [
        ("flipped byte", "UPDATE parses SET value = substr(value, 1, 9) || X'FF' || substr(value, 11)", ()),
        ("cut short", "UPDATE parses SET value = substr(value, 1, length(value) / 2)", ()),
        ("no value", "UPDATE parses SET value = NULL", ()),
        ("text, not bytes", "UPDATE parses SET value = 'x'", ()),
        ("checksum changed", "UPDATE parses SET check_ = check_ + 1", ()),
        (
            "entries swapped",
            "UPDATE parses SET value = (SELECT value FROM parses p2 WHERE p2.key < parses.key "
            "ORDER BY p2.key DESC LIMIT 1) WHERE key > (SELECT min(key) FROM parses)",
            (),
        ),
    ],
)
def test_damaged_entries_are_misses(
    tmp_path: Path,
    catalog: Catalog,
    sample: Path,
    sample_ref: bytes,
    n_sample: int,
    folder: Path,
    how: str,
    sql: str,
    args: tuple[Any, ...],
) -> None:
    scores(tmp_path, catalog, folder, path=sample)
    damage(folder, sql, *args)
    before = dataclasses.replace(stats(folder))
    assert scores(tmp_path, catalog, folder, "damaged.jsonl", path=sample) == sample_ref, how
    after = dataclasses.replace(stats(folder))
    assert after.hits - before.hits <= 1, how  # at most the one entry a swap left in place
    assert after.bad - before.bad >= n_sample - 1, how
    # Parsed again and overwritten: the next rescore reads them all.
    assert scores(tmp_path, catalog, folder, "healed.jsonl", path=sample) == sample_ref
    assert stats(folder).hits - after.hits == n_sample


def hostile(key: bytes, value: bytes) -> tuple[bytes, int]:
    return value, parse_cache._check(key, value)


@pytest.mark.parametrize(
    "value",
    [
        b"\x91" * 200_000 + b"\xc0",  # nested 200,000 deep: RecursionError in any decoder without a bound
        msgspec.msgpack.encode([1, 2, 3]),  # an array of the wrong shape
        msgspec.msgpack.encode({"content": "forged"}),  # a map, not the array an entry is
        b"\xc1",  # not msgpack
    ],
)
def test_hostile_entries_with_valid_checksums_are_misses(
    tmp_path: Path, catalog: Catalog, sample: Path, sample_ref: bytes, n_sample: int, folder: Path, value: bytes
) -> None:
    scores(tmp_path, catalog, folder, path=sample)
    with sqlite3.connect(folder / parse_cache.FILE) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM parses")]
        db.executemany("UPDATE parses SET value = ?, check_ = ? WHERE key = ?", [(*hostile(k, value), k) for k in keys])
    before = dataclasses.replace(stats(folder))
    assert scores(tmp_path, catalog, folder, "hostile.jsonl", path=sample) == sample_ref
    assert stats(folder).bad - before.bad == n_sample


def test_a_file_that_is_no_database_turns_the_cache_off(
    tmp_path: Path, catalog: Catalog, sample: Path, sample_ref: bytes, folder: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    folder.mkdir()
    (folder / parse_cache.FILE).write_bytes(b"this is not SQLite " * 500)
    assert scores(tmp_path, catalog, folder, path=sample) == sample_ref
    err = capfd.readouterr().err
    assert "parse cache" in err and "cannot be used" in err and "Traceback" not in err
    assert (folder / parse_cache.FILE).read_bytes() == b"this is not SQLite " * 500  # left as it was


def test_size_bound_evicts_least_recently_used(
    tmp_path: Path, catalog: Catalog, sample: Path, sample_ref: bytes, n_sample: int
) -> None:
    folder = tmp_path / "small"
    handle = parse_cache.ParseCache(folder, limit=16 << 10)
    parse_cache._OPEN[(os.getpid(), str(folder))] = handle
    try:
        assert scores(tmp_path, catalog, folder, path=sample) == sample_ref
        handle.flush()
        with sqlite3.connect(folder / parse_cache.FILE) as db:
            page = db.execute("PRAGMA page_size").fetchone()[0]
            used = db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
        assert 0 < rows(folder) < n_sample
        assert used * page <= 16 << 10
        assert scores(tmp_path, catalog, folder, "again.jsonl", path=sample) == sample_ref
    finally:
        parse_cache._OPEN.pop((os.getpid(), str(folder)), None)


def test_eviction_takes_other_parser_versions_first(tmp_path: Path) -> None:
    folder = tmp_path / "evict"
    cache = parse_cache.ParseCache(folder, limit=200 << 10)
    db = cache._connect()
    assert db is not None
    with db:
        db.executemany(
            "INSERT INTO parses (key, parser, value, check_, used) VALUES (?, ?, ?, ?, ?)",
            [(bytes([i]), parse_cache.PARSER_VERSION + (i % 2), b"v" * 5000, 0, i) for i in range(40)],
        )
    cache._evict(db)
    left = {k[0] for (k,) in db.execute("SELECT key FROM parses")}
    gone = set(range(40)) - left
    page = db.execute("PRAGMA page_size").fetchone()[0]
    used = db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
    assert used * page <= 200 << 10 and gone
    assert all(i % 2 == 1 for i in gone)  # all the other version's (odd `i`), none of this version's
    assert max(gone) < min(i for i in left if i % 2 == 1)  # the least recently used of them
    cache.close()


def test_round_trip_is_the_parse(tmp_path: Path) -> None:
    """Every field parse_exchange returns, and the answer's facts, come back equal from an entry, for real and odd
    answers (a body whose content is a list, usage nested, a Responses API stream, tool calls, findings, unknown
    events)."""
    _, records = read_cassette(SHIPPED)
    body = b'{"choices":[{"message":{"content":[{"type":"text","text":"hi"}],"tool_calls":[{"function":'
    body += b'{"name":"f","arguments":{"a":1}}}]},"finish_reason":7}],"usage":{"x":{"y":[1,2.5,null,true]}},"model":3}'
    odd = exchange_record([body], id="odd", request={"model": "m"}, event_us=10)
    odd.response.streamed = False
    events = [
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n',
        b'event: response.new_thing\ndata: {"type":"response.new_thing","delta":"?"}\n\n',
        b'event: response.completed\ndata: {"type":"response.completed","response":{"status":"completed",'
        b'"usage":{"output_tokens":1}}}\n\n',
    ]
    responses = exchange_record(events, id="resp", request={"model": "m"}, event_us=10)
    responses.request.path = "/v1/responses"
    for record in [*records, odd, responses]:
        for budget in ({}, {"max_tokens": 2}, {"deadline_us": 1}):
            want = parse_exchange(record, **budget)
            entry = parse_cache.entry_of(parse_exchange(record, **budget), answer_facts(record))
            back = msgspec.msgpack.decode(msgspec.msgpack.encode(entry), type=parse_cache.Entry)
            assert back.facts == answer_facts(record)
            got = parse_cache.parsed_of(back, record)
            assert isinstance(got.timing.itl_us, array)  # the gaps come back compact, as the scorer holds them
            got.timing.itl_us = list(got.timing.itl_us)
            assert got == want, record.id


@pytest.mark.parametrize("gaps", [[], [0, 5, 2**31 - 1], [7, 2**31, 1], [-(2**40), 3]])
def test_gaps_round_trip_packed(gaps: list[int]) -> None:
    """Gaps past int32 take int64; either way they come back as the same integers in the array compact_itl makes."""
    parsed = parse_exchange(exchange_record([b'data: {"choices":[]}\n\n'], id="g", request={"model": "m"}))
    parsed.timing.itl_us = list(gaps)
    value = msgspec.msgpack.encode(parse_cache.entry_of(parsed, AnswerFacts(None, None)))
    got = parse_cache.parsed_of(msgspec.msgpack.decode(value, type=parse_cache.Entry), exchange_record([b""], id="g"))
    assert isinstance(got.timing.itl_us, array) and got.timing.itl_us.tolist() == gaps
    assert got.timing.itl_us.typecode == ("i" if all(-(2**31) <= g < 2**31 for g in gaps) else "q")


def test_gaps_that_are_no_whole_integers_are_a_miss(tmp_path: Path) -> None:
    """An entry whose packed gaps end mid-integer (with a valid checksum) is damaged: parsed again, same answer."""
    record = exchange_record([b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'] * 3, id="x", event_us=10)
    want = parse_exchange(record)
    cache = parse_cache.ParseCache(tmp_path / "c")
    digest = bytes(16)
    first, _ = cache.parse(record, lambda: digest)  # a miss, written
    assert first.timing.itl_us == array("i", want.timing.itl_us)
    cache.end_unit()
    key = parse_cache.key_of(digest, None, None)
    entry = parse_cache.entry_of(parse_exchange(record), answer_facts(record))
    entry.timing.itl_us += b"\x01"  # 9 bytes: two gaps and a stray byte
    value = msgspec.msgpack.encode(entry)
    db = cache._connect()
    assert db is not None
    with db:
        db.execute(
            "UPDATE parses SET value = ?, check_ = ? WHERE key = ?", (value, parse_cache._check(key, value), key)
        )
    got, _ = cache.parse(record, lambda: digest)
    got.timing.itl_us = list(got.timing.itl_us)
    assert got == want and (cache.stats.bad, cache.stats.misses) == (1, 2)
    cache.close()


def test_a_hit_reads_no_read_of_the_record(tmp_path: Path) -> None:
    """The answer's id and last read come from the entry: a hit gives them for a record whose reads are gone."""
    first = b'data: {"id":"chatcmpl-7","choices":[{"delta":{"content":"a"}}]}\n\n'
    record = exchange_record([first, first.replace(b'"a"', b'"b"')], id="x", event_us=25)
    cache = parse_cache.ParseCache(tmp_path / "c")
    _, facts = cache.parse(record, lambda: bytes(16))
    assert facts == AnswerFacts("chatcmpl-7", 50)
    cache.end_unit()
    record.response.chunks, record.response.chunk_us = [], []
    parsed, again = cache.parse(record, lambda: bytes(16))
    assert again == facts and parsed.content == "ab" and cache.stats.hits == 1
    cache.close()


def test_a_reader_skips_the_reads_of_held_parses_and_a_miss_with_other_budgets_reads_them(
    tmp_path: Path, sample: Path, n_sample: int
) -> None:
    cache = parse_cache.ParseCache(tmp_path / "c")
    full = CassetteReader(sample)
    wanted = [(parse_exchange(r), parse_exchange(r, max_tokens=3), full.digest()) for r in full]
    for record, (_, _, digest) in zip(CassetteReader(sample), wanted, strict=True):
        cache.parse(record, lambda digest=digest: digest)  # the first rescore: every parse kept, unbudgeted
    cache.end_unit()
    reader = CassetteReader(sample, skip_reads=cache.holds)
    wholes = []
    for record, (plain, budgeted, _) in zip(reader, wanted, strict=True):
        assert record.response.chunks == []  # held: its reads were not decoded
        parsed, _ = cache.parse(record, reader.digest, whole=reader.whole)
        assert parsed.content == plain.content and parsed.timing.n_events == plain.timing.n_events
        # Another budget is another key: a miss, parsed from the reads `whole` decodes after all.
        parsed, _ = cache.parse(
            record, reader.digest, max_tokens=3, whole=lambda r: wholes.append(r) or reader.whole(r)
        )
        assert (parsed.content, parsed.findings) == (budgeted.content, budgeted.findings)
    assert len(wholes) == n_sample and cache.stats.hits == n_sample
    cache.close()


def _record(i: int) -> Any:
    return exchange_record([b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i] * 2, id=f"x{i}", event_us=10)


def test_look_ups_share_a_read_snapshot_that_ends_before_a_write_and_every_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's entry, written while this one reads in one snapshot: seen once READS look-ups end that
    snapshot, and this one's own writes are not refused for starting from the old one (SQLite's busy snapshot)."""
    monkeypatch.setattr(parse_cache, "READS", 4)
    reader, writer = parse_cache.ParseCache(tmp_path / "c"), parse_cache.ParseCache(tmp_path / "c")
    writer.parse(_record(9), lambda: b"\x09" * 16)
    writer.flush()  # an entry of this parser version: the reader's unit looks up
    reader.parse(_record(0), lambda: bytes(16))  # a miss: its look-up opened the snapshot
    writer.parse(_record(1), lambda: b"\x01" * 16)
    writer.flush()
    assert writer.stats.written == 2
    reader.parse(_record(1), lambda: b"\x01" * 16)  # the snapshot is older than the writer's entry
    assert (reader.stats.hits, reader.stats.misses) == (0, 2)
    reader.end_unit()  # ends the snapshot, then writes its two entries (a unit's end)
    assert (reader.stats.written, reader.stats.dropped) == (2, 0)
    writer.parse(_record(2), lambda: b"\x02" * 16)
    writer.flush()
    for _ in range(4):  # READS look-ups: the fourth ends the snapshot it began with
        reader.parse(_record(0), lambda: bytes(16))
    assert reader.stats.hits == 4
    parsed, _ = reader.parse(_record(2), lambda: b"\x02" * 16)
    assert reader.stats.hits == 5 and parsed.content == "22"
    reader.close()
    writer.close()


def test_a_unit_that_begins_with_no_entry_of_this_parser_looks_nothing_up_and_the_next_finds_its_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first rescore's look-ups would all miss: not made while the file holds no entry of this parser version
    (another version's entries do not count); the next unit asks again and reads what this one wrote."""
    cache = parse_cache.ParseCache(tmp_path / "c")
    monkeypatch.setattr(parse_cache, "PARSER_VERSION", parse_cache.PARSER_VERSION - 1)
    cache.parse(_record(7), lambda: b"\x07" * 16)  # an older parser's entry
    cache.end_unit()
    monkeypatch.undo()
    db = cache._connect()
    assert db is not None
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    for i in range(3):
        assert not cache.holds(bytes([i]) * 16)
        parsed, _ = cache.parse(_record(i), lambda i=i: bytes([i]) * 16)
        assert parsed.content == f"{i}{i}"
    assert not [s for s in statements if "WHERE key" in s]
    assert (cache.stats.misses, cache.stats.hits) == (4, 0)  # the older entry's parse was one
    cache.end_unit()
    for i in range(3):
        assert cache.holds(bytes([i]) * 16)
        parsed, _ = cache.parse(_record(i), lambda i=i: bytes([i]) * 16)
        assert parsed.content == f"{i}{i}"
    assert len([s for s in statements if "WHERE key" in s]) == 3
    assert cache.stats.hits == 3
    cache.close()


def test_gaps_past_int32_read_back_from_the_cache_exactly(tmp_path: Path, catalog: Catalog, folder: Path) -> None:
    """A 50-minute stall between two events (past 32 bits): the scores file and its traffic line hold it, the same
    bytes with a cold cache, a warm one and none."""
    record = exchange_record([b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'] * 4, id="x", event_us=10)
    record.response.chunk_us[2] = 3_000_000_000
    with CassetteWriter(tmp_path / "s.cassette") as writer:
        writer.put(record)
    out = [scores(tmp_path, catalog, folder, f"{i}.jsonl", path=tmp_path / "s.cassette") for i in range(2)]
    rescore_to_file([tmp_path / "s.cassette"], tmp_path / "none.jsonl", catalog=catalog, parse_cache=None)
    assert stats(folder).hits == 1 and out[0] == out[1] == (tmp_path / "none.jsonl").read_bytes()
    assert b'"itl_us":[10,3000000000,10]' in out[1]


def test_keys_differ_by_version_format_and_budget() -> None:
    digest = bytes(16)
    keys = {
        parse_cache.key_of(digest, None, None),
        parse_cache.key_of(digest, 5, None),
        parse_cache.key_of(digest, None, 5),
        parse_cache.key_of(digest, 0, None),
        parse_cache.key_of(bytes(15) + b"\x01", None, None),
    }
    assert len(keys) == 5


def bench_cmd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def test_concurrent_rescores_with_a_pool_share_one_cache(tmp_path: Path, reference: bytes) -> None:
    """Two `bench rescore --jobs 2` at once on one cache folder (four writers), then a third that reads it."""
    folder = tmp_path / "shared"
    env = {**os.environ, parse_cache.ENV: str(folder)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench",
                "rescore",
                str(SHIPPED),
                "--jobs",
                "2",
                "--out",
                str(tmp_path / f"{i}.jsonl"),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    assert rows(folder) == N_SHIPPED
    done = bench_cmd("rescore", str(SHIPPED), "--jobs", "2", "--out", str(tmp_path / "2.jsonl"), env=env)
    assert done.returncode == 0, done.stderr
    for i in range(3):
        assert meta_free(tmp_path / f"{i}.jsonl") == meta_free_bytes(reference)


def meta_free_bytes(data: bytes) -> list[bytes]:
    return data.splitlines()[1:]


def meta_free(path: Path) -> list[bytes]:
    # The CLI's scores file is compared without its meta line: that line holds no parse, and --out names differ.
    return meta_free_bytes(path.read_bytes())


def test_cache_clear_removes_only_its_files(tmp_path: Path, catalog: Catalog, sample: Path) -> None:
    folder = tmp_path / "mine"
    scores(tmp_path, catalog, folder, path=sample)
    parse_cache._OPEN.pop((os.getpid(), str(folder)))
    (folder / "notes.txt").write_text("not the cache's")
    info = bench_cmd("cache", "info", "--parse-cache", str(folder))
    assert info.returncode == 0 and str(folder) in info.stdout and "MiB" in info.stdout
    cleared = bench_cmd("cache", "clear", "--parse-cache", str(folder))
    assert cleared.returncode == 0, cleared.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    off = bench_cmd("cache", "clear", env={**os.environ, parse_cache.ENV: "off"})
    assert off.returncode != 0 and "off" in off.stderr and "Traceback" not in off.stderr


def test_no_parse_cache_flag_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "unused"
    env = {**os.environ, parse_cache.ENV: str(folder)}
    done = bench_cmd(
        "rescore", str(SHIPPED), "--no-parse-cache", "--jobs", "1", "--out", str(tmp_path / "s.jsonl"), env=env
    )
    assert done.returncode == 0, done.stderr
    assert not folder.exists()


def test_dask_workers_write_and_read_the_cache(tmp_path: Path, catalog: Catalog, reference: bytes) -> None:
    pytest.importorskip("distributed")
    folder = tmp_path / "dask"
    assert scores(tmp_path, catalog, folder, "dask1.jsonl", dask="local:2") == reference
    assert rows(folder) == N_SHIPPED  # written by the workers' processes
    with sqlite3.connect(folder / parse_cache.FILE) as db:
        db.execute("UPDATE parses SET used = 0")
    assert scores(tmp_path, catalog, folder, "dask2.jsonl", dask="local:2") == reference
    with sqlite3.connect(folder / parse_cache.FILE) as db:
        stale_uses = db.execute("SELECT count(*) FROM parses WHERE used = 0").fetchone()[0]
    assert stale_uses == 0  # every entry was read (a hit refreshes its use) by the workers
    assert rows(folder) == N_SHIPPED


def test_cassettes_on_s3(tmp_path: Path, catalog: Catalog, s3: Any, sample: Path, n_sample: int) -> None:
    s3.put(str(sample), "bench-runs/runs/up.cassette")
    url = "s3://bench-runs/runs/up.cassette"
    folder = tmp_path / "s3cache"
    ref = tmp_path / "ref.jsonl"
    rescore_to_file([url], ref, catalog=catalog)
    for name in ("cold.jsonl", "warm.jsonl"):
        rescore_to_file([url], tmp_path / name, catalog=catalog, parse_cache=str(folder))
        assert (tmp_path / name).read_bytes() == ref.read_bytes()
    assert stats(folder).hits == n_sample
    parse_cache._OPEN.pop((os.getpid(), str(folder)))


def _open_together(folder: str, barrier: Any, results: Any) -> None:
    cache = parse_cache.ParseCache(folder)
    barrier.wait()
    results.put(cache._connect() is not None)


def test_processes_that_open_a_new_cache_together_all_use_it(tmp_path: Path) -> None:
    """Dask workers open a new cache at once: switching a new file to WAL does not wait for the busy timeout, and the
    worker that lost the race used to work without the cache (half the entries never written)."""
    ctx = multiprocessing.get_context("fork")
    opened = []
    for trial in range(30):
        barrier, results = ctx.Barrier(2), ctx.Queue()
        folder = str(tmp_path / f"new{trial}")
        procs = [ctx.Process(target=_open_together, args=(folder, barrier, results)) for _ in range(2)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(30)
        opened += [results.get(timeout=30) for _ in procs]
    assert opened == [True] * 60
