"""Parse once: every exchange's parse result kept between rescores, so that changing an evaluator does not parse again.

The parse of a recorded exchange depends only on its record's bytes, the parser's version and the budgets
(`--max-tokens`, `--deadline`). docs/scorer.md ("Parse cache") says how to use it; this is why it is built so:
- Where: one SQLite file (FILE) in the user's cache folder ($XDG_CACHE_HOME/bench, else ~/.cache/bench), or the folder
  that BENCH_PARSE_CACHE or `bench rescore --parse-cache DIR` names. Not a sidecar beside the scores file: cassettes
  are often read-only or on object storage, several scores files read the same cassettes, and a cache keyed by content
  serves them all, copies of a cassette included. Never inside a cassette.
- Key: XXH3-128 of the record's payload as the reader checked it (bench.core.cassette: every record's checksum is
  verified before its digest is taken), the parser's version, this file's format and the budgets. A parser change
  misses exactly the old version's entries. An exchange whose body is in part records (no single payload) or a v1
  cassette's (no checked payload) is parsed every time.
- Never trusted: an entry is used only under its own key and with its own checksum (XXH3-64 of key and value),
  bounded in size and decoded into typed structs (msgspec, no pickle); anything else is a miss, parsed again and
  overwritten. A file SQLite cannot read turns the cache off for the process with one line on stderr, never a crash.
  Checksums guard against damage, not against someone who can write the user's own files (the folder is made 0700).
- Bounded: max_bytes (1 GiB by default, BENCH_PARSE_CACHE_BYTES): after each batch written, while the pages in use
  exceed it the least recently used quarter of the entries goes, other parser versions' first (an entry's use is
  refreshed at most once an hour). Between batches it may exceed the bound by one batch.
- Shared: WAL mode; concurrent rescores (process pool workers, Dask workers on one machine, other users of the folder)
  read without blocking and write in short batches; a batch that cannot get the lock in time is dropped (the next
  rescore writes it). A unit that began with no entry of this parser version looks nothing up (a first rescore's
  look-ups would all miss): what others write meanwhile it parses again. Removable at any time (`bench cache clear`):
  a rescore running meanwhile only misses.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import sys
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import xxhash

from bench.core.cassette.records import Exchange
from bench.core.endpoints import endpoint_of
from bench.core.parse import PARSER_VERSION, parse_exchange
from bench.core.parsed import ParsedExchange, Timing, ToolCall, compact_itl
from bench.scorer.answer_facts import AnswerFacts, answer_facts

FORMAT = 2  # bumped when Entry changes (2: the gaps as packed integers, the answer's facts)
FILE = "parses.sqlite"
FILES = (FILE, FILE + "-wal", FILE + "-shm")  # everything the cache writes in its folder
ENV = "BENCH_PARSE_CACHE"  # a folder, or "off"
ENV_BYTES = "BENCH_PARSE_CACHE_BYTES"
MAX_BYTES = 1 << 30
MAX_ENTRY = 64 << 20  # a longer value is not an entry this bench wrote for any record it reads
BATCH = 512  # entries written per transaction
# Look-ups per read transaction: one snapshot for many saves ~1.4 of a look-up's ~5 us; ended that often (and before
# every write) so that other processes' checkpoints go on and their new entries are seen.
READS = 512
TOUCH_S = 3600
BUSY_MS = 2000
_KEY_TAIL = struct.Struct("<HHqq")


# -- what is kept: a ParsedExchange less what the record itself says (id, endpoint, streamed, tags, request body), --
# -- and the answer's facts a traffic line reads (bench.scorer.answer_facts) ----------------------------------------
# array_like: positional, no field names stored; gc=False: only strings, numbers and lists of them.
class _Call(msgspec.Struct, array_like=True, gc=False):
    index: int
    id: str | None
    name: str
    arguments: str
    type: str


class _Timing(msgspec.Struct, array_like=True, gc=False):
    ttft_us: int | None
    e2el_us: int | None
    tpot_us: float | None
    # The gaps as little-endian int32 (int64 when `wide`), as compact_itl holds them: decoded with one copy, where a
    # list of 300 integers took ~11 us (most of an entry's decoding) and its array as much again.
    itl_us: bytes
    wide: bool
    output_tokens: int | None
    tokens_source: str | None
    n_events: int


class Entry(msgspec.Struct, array_like=True, gc=False):
    # Any where a non-streamed body's JSON is taken as it is (a server may send other types than the API's).
    status: int | None
    outcome: str
    error: Any
    content: Any
    reasoning: Any
    refusal: Any
    tool_calls: list[_Call]
    finish_reason: Any
    usage: Any
    model: Any
    system_fingerprint: Any
    findings: list[str]
    timing: _Timing
    unknown_events: dict[str, int]
    facts: AnswerFacts


# Whether any entry of a parser version is held: one seek in the (parser, used) index.
_ANY = "SELECT EXISTS (SELECT 1 FROM parses WHERE parser = ?)"
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Entry)


def _packed(gaps: array[int]) -> bytes:
    if sys.byteorder == "little":
        return gaps.tobytes()
    swapped = array(gaps.typecode, gaps)
    swapped.byteswap()
    return swapped.tobytes()


def _unpacked(data: bytes, wide: bool) -> array[int]:
    """The gaps _packed wrote (ValueError: not a whole number of them)."""
    gaps = array("q" if wide else "i")
    gaps.frombytes(data)
    if sys.byteorder != "little":
        gaps.byteswap()
    return gaps


def entry_of(p: ParsedExchange, facts: AnswerFacts) -> Entry:
    """What is kept of `p` and its record's `facts`; `p`'s gaps become the compact array the entry holds (the scorer
    holds them so anyway)."""
    t = p.timing
    gaps = t.itl_us = compact_itl(t.itl_us)
    return Entry(
        status=p.status,
        outcome=p.outcome,
        error=p.error,
        content=p.content,
        reasoning=p.reasoning,
        refusal=p.refusal,
        tool_calls=[_Call(c.index, c.id, c.name, c.arguments, c.type) for c in p.tool_calls],
        finish_reason=p.finish_reason,
        usage=p.usage,
        model=p.model,
        system_fingerprint=p.system_fingerprint,
        findings=p.findings,
        timing=_Timing(
            t.ttft_us,
            t.e2el_us,
            t.tpot_us,
            _packed(gaps),
            gaps.typecode != "i",
            t.output_tokens,
            t.tokens_source,
            t.n_events,
        ),
        unknown_events=p.unknown_events,
        facts=facts,
    )


def parsed_of(e: Entry, record: Exchange) -> ParsedExchange:
    """The ParsedExchange that parse_exchange returned for this record when the entry was made (its gaps as the
    compact array). ValueError: gaps that are no whole number of integers."""
    t = e.timing
    calls = [ToolCall(index=c.index, id=c.id, name=c.name, arguments=c.arguments, type=c.type) for c in e.tool_calls]
    for call in calls:
        call.finish()  # parsed_arguments and valid_json, from the arguments as parse_exchange derived them
    return ParsedExchange(
        id=record.id,
        endpoint=endpoint_of(record.request.path),
        status=e.status,
        outcome=e.outcome,
        streamed=record.response.streamed,
        content=e.content,
        reasoning=e.reasoning,
        refusal=e.refusal,
        tool_calls=calls,
        finish_reason=e.finish_reason,
        usage=e.usage,
        model=e.model,
        system_fingerprint=e.system_fingerprint,
        error=e.error,
        findings=e.findings,
        timing=Timing(
            t.ttft_us,
            t.e2el_us,
            t.tpot_us,
            _unpacked(t.itl_us, t.wide),
            t.output_tokens,
            t.tokens_source,
            t.n_events,
            record.timing.loop_lag_us,
            # Like the loop lag, where the exchange lies on the wall clock is the record's, not the parse's.
            record.started or None,
            record.timing.end or None,
        ),
        tags=dict(record.tags),
        request_body=record.request.body,
        unknown_events=e.unknown_events,
    )


# -- where it is ------------------------------------------------------------------------------------------------------


def default_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "bench"


def configured(folder: str | None = None, *, off: bool = False) -> str | None:
    """The cache folder a command uses: `folder` if given, else BENCH_PARSE_CACHE, else the default; None when off."""
    if off:
        return None
    chosen = folder if folder is not None else os.environ.get(ENV)
    if chosen is not None and chosen.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    return str(Path(chosen).expanduser() if chosen else default_folder())


def max_bytes() -> int:
    raw = os.environ.get(ENV_BYTES, "")
    try:
        value = int(raw)
    except ValueError:
        return MAX_BYTES
    return value if value > 0 else MAX_BYTES


def key_of(digest: bytes, max_tokens: int | None, deadline_us: int | None) -> bytes:
    """What an entry is kept under: the record's digest, the parser's version, this format and the budgets."""
    tail = _KEY_TAIL.pack(PARSER_VERSION, FORMAT, -1 if max_tokens is None else max_tokens, deadline_us or -1)
    return digest + tail


def _check(key: bytes, value: bytes) -> int:
    h = xxhash.xxh3_64(key)
    h.update(value)
    return h.intdigest() >> 1  # SQLite integers are signed 64-bit


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0
    bad: int = 0  # entries found damaged (a miss each)
    written: int = 0
    dropped: int = 0  # entries not written (lock not obtained in time, or a value that would not encode)


class ParseCache:
    """One process's handle on the cache folder (`parse` is the pipeline's one call). Opened on first use."""

    def __init__(self, folder: str | Path, limit: int | None = None) -> None:
        self.folder = Path(folder)
        self.limit = limit if limit is not None else max_bytes()
        self.stats = Stats()
        self._db: sqlite3.Connection | None = None
        self._off = False
        self._pending: list[tuple[bytes, bytes, int, int]] = []
        self._touch: list[tuple[int, bytes]] = []
        self._now = int(time.time())
        self._reads = 0  # look-ups in the read transaction open
        # Whether the file held no entry of this parser version when the unit began: its look-ups would all miss, and
        # are not made (~13 us an exchange, 1/30 of a first rescore). None: not asked yet in this unit.
        self._none: bool | None = None
        # What `holds` found, for the `parse` that follows: key, entry (None: a miss), whether to touch it.
        self._held: tuple[bytes, Entry | None, bool] | None = None

    def holds(self, digest: bytes, *, max_tokens: int | None = None, deadline_us: int | None = None) -> bool:
        """Whether an entry (checked, decoded) holds the parse of the payload with this digest: the reader then
        skips the exchange's reads (CassetteReader's `skip_reads`), and `parse` uses the entry found here."""
        db = None if self._off else self._connect()
        if db is None:
            return False
        key = key_of(digest, max_tokens, deadline_us)
        found = self._entry(db, key)
        self._held = (key, None, False) if found is None else (key, *found)
        return found is not None

    def parse(
        self,
        record: Exchange,
        digest: Callable[[], bytes | None],
        *,
        max_tokens: int | None = None,
        deadline_us: int | None = None,
        whole: Callable[[Exchange], Exchange] | None = None,
    ) -> tuple[ParsedExchange, AnswerFacts]:
        """parse_exchange(record, ...) and answer_facts(record), from the cache when an entry holds them. `digest`
        gives the record's checked payload digest (None: not cacheable); `whole` the record with its reads when the
        reader skipped them (a miss, with budgets other than those `holds` was asked with). Raises what
        parse_exchange raises (nothing is kept then)."""
        db = None if self._off else self._connect()
        raw = digest() if db is not None else None
        key = None if raw is None else key_of(raw, max_tokens, deadline_us)
        if db is not None and key is not None:
            found = self._get(db, key, record)
            if found is not None:
                self.stats.hits += 1
                return found
            self.stats.misses += 1
        parsed, facts = parse_record(whole(record) if whole is not None else record, max_tokens, deadline_us)
        if key is not None:
            self._put(key, parsed, facts)
        return parsed, facts

    def _get(self, db: sqlite3.Connection, key: bytes, record: Exchange) -> tuple[ParsedExchange, AnswerFacts] | None:
        held = self._held
        if held is not None and held[0] == key:  # looked up by `holds` a moment ago (a miss is not looked up again)
            _, entry, touch = held
            self._held = (key, entry, False)  # touched once
        else:
            entry, touch = self._entry(db, key) or (None, False)
        if entry is None:
            return None
        if touch:
            self._touch.append((self._now, key))
        # `_entry` checked what parsed_of could find wrong (the gaps' length): a held entry rebuilds its parse.
        return parsed_of(entry, record), entry.facts

    def _entry(self, db: sqlite3.Connection, key: bytes) -> tuple[Entry, bool] | None:
        """The entry under `key`, checked and decoded, and whether its last use is to be written; None: a miss."""
        if self._none:
            return None
        try:
            if not db.in_transaction:
                db.execute("BEGIN")
            if self._none is None:
                self._none = not db.execute(_ANY, (PARSER_VERSION,)).fetchone()[0]
                if self._none:
                    return None
            row = db.execute("SELECT value, check_, used FROM parses WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return None  # busy past BUSY_MS, say: a miss
        except sqlite3.Error as exc:
            self._disable(exc)
            return None
        finally:
            self._reads += 1
            if self._reads >= READS:
                self._end_reads()
        if row is None:
            return None
        value, check, used = row
        try:
            if not isinstance(value, bytes) or len(value) > MAX_ENTRY or check != _check(key, value):
                raise ValueError("checksum")
            entry = _DECODER.decode(value)
            if len(entry.timing.itl_us) % (8 if entry.timing.wide else 4):
                raise ValueError("gaps that are no whole number of integers")  # a held entry must rebuild its parse
        except (ValueError, TypeError, RecursionError, msgspec.DecodeError):
            self.stats.bad += 1
            return None
        return entry, not isinstance(used, int) or self._now - used > TOUCH_S

    def _put(self, key: bytes, parsed: ParsedExchange, facts: AnswerFacts) -> None:
        try:
            value = _ENCODER.encode(entry_of(parsed, facts))
        except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
            self.stats.dropped += 1  # e.g. an integer past 64 bits in a body's usage: parsed every time
            return
        if len(value) > MAX_ENTRY:
            self.stats.dropped += 1
            return
        self._pending.append((key, value, _check(key, value), self._now))
        if len(self._pending) >= BATCH:
            self.flush()

    def _end_reads(self) -> None:
        """End the read transaction the look-ups share (a write must not start from an older snapshot: SQLite would
        refuse it if another process wrote since)."""
        self._reads = 0
        if self._db is not None and self._db.in_transaction:
            try:
                self._db.commit()
            except sqlite3.Error as exc:
                self._disable(exc)

    def flush(self) -> None:
        """Write what is pending (end of a unit; also every BATCH entries), then keep the file within its bound."""
        self._end_reads()
        if self._db is None or self._off or not (self._pending or self._touch):
            self._pending, self._touch = [], []
            return
        pending, touch = self._pending, self._touch
        self._pending, self._touch = [], []
        db = self._db
        try:
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO parses (key, parser, value, check_, used) VALUES (?, ?, ?, ?, ?)",
                    [(k, PARSER_VERSION, v, c, u) for k, v, c, u in pending],
                )
                db.executemany("UPDATE parses SET used = ? WHERE key = ?", touch)
            self.stats.written += len(pending)
            self._evict(db)
        except sqlite3.OperationalError:
            self.stats.dropped += len(pending)  # locked past BUSY_MS by other writers: a later rescore writes them
        except sqlite3.Error as exc:
            self._disable(exc)

    def end_unit(self) -> None:
        """A unit's end: what is pending written; the next unit asks again whether the file holds entries (this one's
        among them)."""
        self.flush()
        self._none = None

    def _evict(self, db: sqlite3.Connection) -> None:
        """While the file's pages in use exceed the bound, the least recently used quarter of the entries goes, other
        parser versions' first (freed pages are reused, so the file stays near the bound)."""
        page = db.execute("PRAGMA page_size").fetchone()[0]
        while True:
            used = db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
            rows = db.execute("SELECT count(*) FROM parses").fetchone()[0]
            if used * page <= self.limit or not rows:
                return
            with db:
                db.execute(
                    "DELETE FROM parses WHERE key IN (SELECT key FROM parses ORDER BY parser = ?, used LIMIT ?)",
                    (PARSER_VERSION, max(1, rows // 4)),
                )

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        # Workers that open a new cache together race for its set-up, and switching a new file to WAL does not wait
        # for the busy timeout ("database is locked" at once, 9 times in 60 for two processes): the set-up is
        # idempotent, so it is tried again until BUSY_MS has passed.
        deadline = time.monotonic() + BUSY_MS / 1000
        while True:
            try:
                self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
                db = _open(self.folder / FILE)
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY  # (extended codes too)
                if busy and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                self._disable(exc)
                return None
            except (OSError, sqlite3.Error) as exc:
                self._disable(exc)
                return None
            self._db = db
            return db

    def _disable(self, exc: Exception) -> None:
        if not self._off:
            print(
                f"bench: warning: parse cache {self.folder / FILE} cannot be used ({exc}); parsing without it "
                "(`bench cache clear` removes it)",
                file=sys.stderr,
            )
        self._off = True
        self._pending, self._touch = [], []
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None


def parse_record(
    record: Exchange, max_tokens: int | None = None, deadline_us: int | None = None
) -> tuple[ParsedExchange, AnswerFacts]:
    """What an entry holds, made from the record: its parse (parse_exchange) and its answer's facts."""
    return parse_exchange(record, max_tokens=max_tokens, deadline_us=deadline_us), answer_facts(record)


def _open(path: Path) -> sqlite3.Connection:
    """The cache file, in WAL mode, with its table (created if new); closed again if any step fails."""
    db = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None)
    try:
        db.isolation_level = "DEFERRED"  # `with db:` is one transaction
        db.text_factory = bytes  # a value changed into text is read as bytes (and fails its check), not decoded
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # a cache: a power cut may lose the last entries, never corrupt
        db.execute(
            "CREATE TABLE IF NOT EXISTS parses (key BLOB PRIMARY KEY, parser INTEGER, value BLOB, check_ INTEGER,"
            " used INTEGER)"
        )
        db.execute("CREATE INDEX IF NOT EXISTS parses_used ON parses (parser, used)")
    except BaseException:
        db.close()
        raise
    return db


def clear(folder: str | Path) -> int:
    """Remove the cache's files (only those: the folder may hold others); returns the bytes freed."""
    freed = 0
    for name in FILES:
        path = Path(folder) / name
        try:
            freed += path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
    return freed


def size(folder: str | Path) -> int:
    total = 0
    for name in FILES:
        try:
            total += (Path(folder) / name).stat().st_size
        except FileNotFoundError:
            continue
    return total


_OPEN: dict[tuple[int, str], ParseCache] = {}


def for_process(folder: str | None) -> ParseCache | None:
    """This process's handle on `folder` (None: no cache). A forked worker opens its own: a SQLite connection must not
    cross a fork."""
    if folder is None:
        return None
    key = (os.getpid(), folder)
    cache = _OPEN.get(key)
    if cache is None:
        cache = _OPEN[key] = ParseCache(folder)
    return cache
