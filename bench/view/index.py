"""What `bench view` serves, loaded once: every result of every scores source, as typed rows, plus the runs.

Scores are read with the scorer's own readers (a scores file a line at a time, or cassettes rescored in memory); a
result's checks and exchange list are read again from its line, and its exchanges from its cassette, only when it is
opened, so a run of 100,000 exchanges costs one small row each here.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from bench.core.cassette.records import Exchange
from bench.core.cassette.seek import SeekIndex
from bench.core.errors import BenchError, CassetteError
from bench.core.storage import Location, is_url
from bench.scorer.caveats import INTERRUPTED, CaveatTally, interrupted_cassettes, result_flags
from bench.scorer.report.cost import Prices
from bench.scorer.report.latency import task_seconds
from bench.scorer.report.load import Scores, load, paused_gc, scores_file
from bench.scorer.report.stats import wilson
from bench.scorer.results import ExchangeScore, Meta, Result, TrafficLine
from bench.scorer.scores_io import open_scores, read_result_at
from bench.view.load_view import LoadTallies
from bench.view.search import TextSearch, exchange_key, owners_of

RECENT = 8  # results whose records stay in memory after being opened


class Row(msgspec.Struct, frozen=True):
    """One result as the results table shows it; `n` is its position in Index.rows (stable for one load)."""

    n: int
    run: str
    model: str
    suite: str
    test: str
    epoch: int
    passed: bool | None
    failure_type: str | None
    score: float | None
    ttft_us: int | None
    e2el_us: int | None
    tokens: int | None
    retries: int
    source: int
    # What the numbers cannot show (bench.scorer.caveats): max_tokens, no_finish_reason, replayed timing.
    flags: list[str] = msgspec.field(default_factory=list)
    task_s: float | None = None  # the result's wall time, every turn included (docs/report.md, "Seconds per task")
    calls: str | None = None  # the tool calls against the reference's: same | more | fewer | different
    status: str = "scored"  # scored | errored (in transport: no verdict) | skipped | stale | unknown | unscored


class ModelRate(msgspec.Struct):
    model: str
    passed: int
    n: int
    rate: float
    low: float
    high: float


class Run(msgspec.Struct):
    id: str
    source: str
    models: list[ModelRate]
    settings: dict[str, Any]
    fingerprints: list[str]
    catalog_hash: str | None
    results: int


class _RunTally:
    """What the Runs view needs of a run, gathered as its results are read."""

    def __init__(self, source: int, settings: dict[str, Any]) -> None:
        self.source = source
        self.settings = settings  # the first result's sampling settings
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # model -> [passed, scored]
        self.fingerprints: set[str] = set()
        self.results = 0


class Index:
    """Every result as a Row; the rest of a result (checks, exchanges) is read again from its scores file when one
    is opened (results rescored in memory are kept whole), and its exchanges are read from the cassette through a
    seek index (bench.core.cassette.seek), so memory is one small row per result."""

    def __init__(self) -> None:
        self.sources: list[Scores] = []
        self.rows: list[Row] = []
        self.by_key: dict[tuple[str, str, str, int], int] = {}
        self._files: list[Path | None] = []  # per source: the scores file its results are read again from
        self._at = array("q")  # per row: the byte offset of its line in that file, or -1 (held in memory)
        self._held: dict[int, Result] = {}
        self._tally: dict[str, _RunTally] = {}
        self._seek: dict[str, SeekIndex] = {}
        self._cassettes: dict[str, Location] = {}  # every cassette named (by where it is), in order of first mention
        self._where: dict[tuple[int, str], str] = {}  # (source, cassette as results name it) -> where it is
        self._recent: dict[int, dict[str, Exchange]] = {}
        self._lock = threading.Lock()  # results are opened from request threads
        self._caveats: list[CaveatTally] = []  # per source
        self._interrupted: list[frozenset[str]] = []  # per source: cassettes whose run did not finish
        self.warnings: list[str] = []
        self.prices: Prices | None = None  # `--prices`: each model call's cost
        self.load = LoadTallies()  # `bench load` runs' levels, per source
        # Per exchange a result names: a hash of (cassette, id) and the result's row, for the text search to find
        # whose an exchange is (12 bytes each; the search sorts them once, when it is first used).
        self._exchange_keys = array("Q")
        self._exchange_rows = array("i")
        self._search: TextSearch | None = None

    def add_loaded(self, scores: Scores) -> None:
        """A source whose results are in memory (rescored from cassettes)."""
        s = self._source(scores, None)
        for result in scores.results:
            self.load.add(s, result)
        for entry in scores.traffic:
            self.load.add(s, entry)
        for result in [*scores.results, *_untagged(scores.results, scores.traffic)]:
            self._held[self._add(s, result, -1)] = result

    def add_file(self, path: Path) -> None:
        """A scores file, read a line at a time: each result leaves a row and its line's offset."""
        meta, lines = open_scores(path)
        s = self._source(Scores(str(path), path.parent, meta, []), path)
        covered: set[tuple[str, str]] = set()
        traffic: list[TrafficLine] = []
        with paused_gc():
            for offset, line in lines:
                self.load.add(s, line)
                if isinstance(line, Result):
                    covered.update((line.cassette, e.id) for e in line.exchanges)
                    self._add(s, line, offset)
                elif (line.cassette, line.id) not in covered:
                    # bench rescore writes every result line before the traffic lines: the set is complete here.
                    traffic.append(line)
        for result in _untagged([], traffic):
            self._held[self._add(s, result, -1)] = result

    def _source(self, scores: Scores, path: Path | None) -> int:
        self.sources.append(scores)
        self._files.append(path)
        self._caveats.append(CaveatTally(scores.meta))
        self._interrupted.append(interrupted_cassettes(scores.meta))
        self.load.source(len(self.sources) - 1, scores.meta)
        return len(self.sources) - 1

    def _add(self, source: int, result: Result, offset: int) -> int:
        caveats = self._caveats[source]
        caveats.add(result)
        flags = result_flags(result, caveats.replayed)
        if result.cassette in self._interrupted[source]:
            flags.append(INTERRUPTED)
        row = _row(len(self.rows), source, result, flags)
        where = self._where.get((source, result.cassette))
        if where is None:
            located = self._locate(source, result.cassette)
            where = self._where[(source, result.cassette)] = str(located)
            self._cassettes.setdefault(where, located)
        self.by_key[(row.run, row.model, row.test, row.epoch)] = row.n
        self.rows.append(row)
        for e in result.exchanges:
            self._exchange_keys.append(exchange_key(where, e.id))
            self._exchange_rows.append(row.n)
        self._at.append(offset)
        tally = self._tally.get(row.run)
        if tally is None:
            tally = self._tally[row.run] = _RunTally(source, dict(result.settings))
        tally.results += 1
        count = tally.counts[row.model]
        # As in the reports: results that errored in transport (status "errored") are left out of pass rates.
        if result.status == "scored":
            count[1] += 1
            count[0] += row.passed is True
        if result.system_fingerprint:
            tally.fingerprints.add(result.system_fingerprint)
        return row.n

    def finish(self) -> None:
        self.runs = _runs(self.sources, self._tally)
        several = len(self.sources) > 1
        for scores, caveats in zip(self.sources, self._caveats, strict=True):
            self.warnings.extend(f"{scores.source}: {line}" if several else line for line in caveats.lines())
        self.load.finish()
        self.facets = {
            "run": sorted({r.run for r in self.rows}),
            "model": sorted({r.model for r in self.rows}),
            "suite": sorted({r.suite for r in self.rows}),
            "failure_type": sorted({r.failure_type for r in self.rows if r.failure_type}),
        }

    @property
    def search(self) -> TextSearch:
        """The full-text search over prompts and answers, made (not yet read: its first query starts that) once."""
        with self._lock:
            if self._search is None:
                owner = owners_of(self._exchange_keys, self._exchange_rows)
                self._search = TextSearch(dict(self._cassettes), owner, len(self.rows), len(self._exchange_keys))
            return self._search

    def find(self, run: str, model: str, test: str, epoch: int) -> int:
        n = self.by_key.get((run, model, test, epoch))
        if n is None:
            raise KeyError(f"no result for run {run!r}, model {model!r}, test {test!r}, epoch {epoch}")
        return n

    def result(self, n: int) -> Result:
        """Result n whole: held, or read again from its line of the scores file (checked to be the same result)."""
        held = self._held.get(n)
        if held is not None:
            return held
        row = self.rows[n]
        path = self._files[row.source]
        assert path is not None
        result = read_result_at(path, self._at[n])
        if result is None or _key(result) != (row.run, row.model, row.test, row.epoch):
            raise BenchError(f"{path}: changed since bench view read it (rescored?); restart bench view")
        return result

    def _locate(self, source: int, name: str) -> Location:
        """Where a result's cassette is: its URL, or its path relative to the scores file's folder."""
        return name if is_url(name) else self.sources[source].base / name

    def _seeker(self, where: Location) -> SeekIndex:
        with self._lock:
            seek = self._seek.get(str(where))
            if seek is None:
                seek = self._seek[str(where)] = SeekIndex(where)
            return seek

    def warm_in_background(self) -> threading.Thread:
        """Index every cassette ahead of any click, in a daemon thread: opening a result then reads one frame even
        the first time (a 100,000-exchange cassette takes a while to index; a click before that waits for the
        frames up to its own)."""

        def warm() -> None:
            for where in list(self._cassettes.values()):
                self._seeker(where).warm()

        thread = threading.Thread(target=warm, name="bench-view-index", daemon=True)
        thread.start()
        return thread

    def records(self, n: int) -> dict[str, Exchange]:
        """The result's exchange records by id, read from its cassette through its seek index: one zstd frame per
        record, not the records before it. The last few results read are kept: opening a result and then its raw
        bytes, or the two sides of a flip, reads once."""
        with self._lock:
            if n in self._recent:
                self._recent[n] = self._recent.pop(n)
                return self._recent[n]
        result = self.result(n)
        seek = self._seeker(self._locate(self.rows[n].source, result.cassette))
        try:
            found = seek.read([e.id for e in result.exchanges])
        except (CassetteError, OSError) as exc:
            raise BenchError(f"cannot read the cassette of this result: {exc}") from None
        with self._lock:
            self._recent[n] = found
            while len(self._recent) > RECENT:
                del self._recent[next(iter(self._recent))]
        return found


UNTAGGED = "untagged"


def _untagged(results: list[Result], traffic: list[TrafficLine]) -> list[Result]:
    """Exchanges that no result covers (untagged traffic no rule scored), as unscored results of the run
    "untagged", suite = endpoint, so they browse like any result: an agent session's exchanges (bench.scorer.sessions)
    as one result, test = "session ID", its exchanges as its turns; any other exchange alone, test = cassette#id."""
    covered = {(r.cassette, e.id) for r in results for e in r.exchanges}
    groups: dict[tuple[str, str], list[TrafficLine]] = {}
    for entry in traffic:
        if (entry.cassette, entry.id) in covered:
            continue
        groups.setdefault((entry.cassette, entry.session or f"#{entry.id}"), []).append(entry)
    return [_untagged_result(cassette, lines) for (cassette, _), lines in groups.items()]


def _untagged_result(cassette: str, lines: list[TrafficLine]) -> Result:
    first = lines[0]
    session = first.session if len(lines) > 1 else None
    return Result(
        run=UNTAGGED,
        model=first.model or first.served_model or "",
        suite=first.endpoint,
        test=f"session {session}" if session is not None else f"{cassette}#{first.id}",
        epoch=0,
        passed=None,
        status="unscored",
        cassette=cassette,
        system_fingerprint=first.system_fingerprint,
        findings=sorted({f for line in lines for f in line.findings}),
        exchanges=[
            ExchangeScore(
                id=line.id,
                turn=turn,
                outcome=line.outcome,
                status=line.status,
                final=True,
                ttft_us=line.ttft_us,
                e2el_us=line.e2el_us,
                tpot_us=line.tpot_us,
                output_tokens=line.output_tokens,
                tokens_source=line.tokens_source,
                n_events=line.n_events,
            )
            for turn, line in enumerate(lines)
        ],
    )


def _key(result: Result) -> tuple[str, str, str, int]:
    return (result.run or "", result.model or "", result.test, result.epoch)


def _final(result: Result) -> ExchangeScore:
    finals = [e for e in result.exchanges if e.final]
    return (finals or result.exchanges or [ExchangeScore()])[-1]


def _row(n: int, source: int, r: Result, flags: list[str]) -> Row:
    final = _final(r)
    return Row(
        n=n,
        # Interned: a run of 100,000 results repeats a handful of these; each line read would keep its own copy.
        run=sys.intern(r.run or ""),
        model=sys.intern(r.model or ""),
        suite=sys.intern(r.suite or ""),
        test=sys.intern(r.test),
        epoch=r.epoch,
        passed=r.passed,
        failure_type=None if r.failure_type is None else sys.intern(r.failure_type),
        score=r.score,
        ttft_us=final.ttft_us,
        e2el_us=final.e2el_us,
        tokens=final.output_tokens,
        retries=r.retries,
        source=source,
        flags=flags,
        task_s=task_seconds(r.exchanges),
        calls=None if r.calls is None else sys.intern(r.calls.verdict),
        status=sys.intern(r.status),
    )


def _runs(sources: list[Scores], tallies: dict[str, _RunTally]) -> list[Run]:
    runs = []
    for run_id, tally in tallies.items():
        source = sources[tally.source]
        rates = []
        for model, (passed, n) in sorted(tally.counts.items()):
            low, high = wilson(passed, n)
            rates.append(ModelRate(model, passed, n, passed / n if n else 0.0, low, high))
        runs.append(
            Run(
                id=run_id,
                source=source.source,
                models=rates,
                settings=tally.settings,
                fingerprints=sorted(tally.fingerprints),
                catalog_hash=_catalog_hash(source.meta, run_id),
                results=tally.results,
            )
        )
    return runs


def _catalog_hash(meta: Meta, run_id: str) -> str | None:
    for cassette in meta.cassettes:
        if cassette.run == run_id and cassette.run_meta.catalog_hash:
            return cassette.run_meta.catalog_hash
    return None


def open_index(paths: Iterable[Location], allow_empty: bool = False) -> Index:
    """Load every PATH (a scores file, a folder with scores.jsonl, cassettes to rescore in memory, or cassettes at
    an object-storage URL, also rescored in memory). `allow_empty`: no results is no error (a view that follows a
    recording in progress)."""
    index = Index()
    for path in paths:
        found = scores_file(path)
        if found is not None:
            index.add_file(found)
        else:
            index.add_loaded(load(path))
    if not index.rows and not allow_empty:
        raise BenchError("no results and no exchanges in the given paths; record a run or run `bench rescore PATH`")
    index.finish()
    return index
