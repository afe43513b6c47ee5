"""One unit of a rescore: a cassette (or the cassettes of a run recorded by several workers, read as one in start
order: bench.core.cassette.runs), or one shard of a large one, streamed record by record into scored results.

A unit keeps only the results whose key hashes to its shard, parsed at once and slimmed (bench.scorer.context.Turn),
so raw chunks never accumulate. Everything it needs comes in its arguments (the catalog and the options), so the same
function runs in this process, in a forked worker and on a Dask worker.
"""

from __future__ import annotations

import contextlib
import gc
import os
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from bench.catalog.model import Catalog, TestSpec
from bench.core import storage
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import Exchange, ServerInfo
from bench.core.cassette.runs import in_start_order
from bench.core.endpoints import endpoint_of
from bench.core.errors import CassetteError
from bench.core.parsed import ParsedExchange, compact_itl
from bench.scorer import parse_cache
from bench.scorer.answer_facts import AnswerFacts
from bench.scorer.checks import check_deadlines
from bench.scorer.context import Turn
from bench.scorer.failures import EVALUATOR_ERROR
from bench.scorer.recognise import Recogniser
from bench.scorer.results import CassetteInfo, Result, TrafficLine, Verdict
from bench.scorer.rules import Rule, as_chat, rule_spec
from bench.scorer.scoring import (
    conversation_result,
    request_settings,
    score_conversation,
    slim,
    to_int,
    turn_order,
)
from bench.scorer.traffic_lines import load_tag, traffic_entry

Key = tuple[str, str, str, int]  # run, model, test, epoch
# A record the parser cannot read (a field of the wrong type): reported and skipped, never the end of the rescore.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError)


class Unit(NamedTuple):
    """A cassette (a path or an object-storage URL) and which of its `shards` shards to score; `more`: the other
    cassettes of its run (a run recorded by several workers), read with it as one."""

    location: storage.Location
    shard: int = 0
    shards: int = 1
    more: tuple[storage.Location, ...] = ()

    @property
    def files(self) -> tuple[storage.Location, ...]:
        return (self.location, *self.more)

    def mine(self, key: object) -> bool:
        """Whether a result of this key is scored by this shard."""
        return self.shards == 1 or zlib.crc32(repr(key).encode()) % self.shards == self.shard

    def reports(self, exchange_id: str) -> bool:
        """Whether this shard writes the traffic line of an untagged exchange."""
        return self.shards == 1 or zlib.crc32(exchange_id.encode()) % self.shards == self.shard


@dataclass(frozen=True)
class Options:
    base: Path
    suites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    max_tokens: int | None = None
    deadline_us: int | None = None
    rules: tuple[Rule, ...] = ()
    parse_cache: str | None = None  # the parse cache's folder (bench.scorer.parse_cache); None: parse every exchange


@dataclass
class UnitOutput:
    cassettes: list[CassetteInfo]  # each cassette read (none when none could be)
    results: list[Result]
    warnings: list[str]
    unknown: Counter[str]
    stale: Counter[str]
    traffic: list[TrafficLine] = field(default_factory=list)
    # Why checks could not be evaluated (each error verdict's detail), and how often: said in the meta's warnings.
    check_errors: Counter[str] = field(default_factory=Counter)
    # The cassette name a run's traffic lines are ordered under when the unit reads several (its shards); None: each
    # line's own.
    order: str | None = None


@dataclass
class Group:
    turns: list[Turn] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    first: tuple[int, int] | None = None
    # Set for untagged exchanges claimed by a rule or recognised as a catalog test: the test to score them with, and
    # the hash they count as recorded with (their request is the test's, so they are not stale).
    spec: TestSpec | None = None
    recorded: str | None = None
    level: int | None = None  # the `bench load` level of its first exchange

    def add(self, turn: Turn, parsed: ParsedExchange) -> None:
        self.turns.append(turn)
        order = (turn.turn, turn.attempt)
        if self.first is None or order < self.first:
            self.first, self.settings = order, request_settings(parsed)
            tag = load_tag(parsed.tags)
            self.level = tag.level if tag is not None else None


@dataclass(frozen=True)
class Claim:
    """An untagged exchange claimed for scoring: by a rule, or as a repeat of a catalog test's request."""

    key: Key
    spec: TestSpec
    turn: int
    attempt: int


def _body(record: Exchange) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(record.request.body)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _body_model(record: Exchange) -> str:
    doc = _body(record)
    return str(doc.get("model") or "") if doc is not None else ""


class Claimer:
    """Claims untagged exchanges for scoring, in cassette order (epochs are counted as exchanges come)."""

    def __init__(self, catalog: Catalog, rules: tuple[Rule, ...], run: str) -> None:
        self.recogniser = Recogniser.of(catalog)
        self.rules = rules
        self.run = run
        self.counts: Counter[tuple[str, str]] = Counter()

    def claims(self, record: Exchange, model: str, tagged: bool) -> list[Claim]:
        doc = _body(record)
        if doc is None:
            return []
        endpoint = endpoint_of(record.request.path)
        chat = as_chat(doc, endpoint)
        out: list[Claim] = []
        if not tagged:
            found = self.recogniser.claim(chat, model, record)
            if found is not None:
                key: Key = (self.run, model, found.test.id, found.epoch)
                out.append(Claim(key, found.test, found.turn, found.attempt))
        for rule in self.rules:
            if rule.matches(endpoint, model, doc, tagged):
                epoch = self.counts[(model, rule.id)]
                self.counts[(model, rule.id)] += 1
                out.append(Claim((self.run, model, rule.id, epoch), rule_spec(rule, chat), 0, 1))
        return out


def relative_name(path: storage.Location, base: Path) -> str:
    """How a result names its cassette: relative to the scores file's folder, or the URL of one on object storage."""
    return str(path) if storage.is_url(path) else os.path.relpath(Path(path).resolve(), base)


# Exchanges read, counted for the progress of the work (bench.scorer.progress), every TICK of them; None: nobody asks.
# Set per process: by bench.scorer.units in this one, by a pool worker's start in each worker.
tick: Callable[[int], None] | None = None
TICK = 64


def score_unit(unit: Unit, catalog: Catalog, options: Options) -> UnitOutput:
    """Every result of one unit, scored, with its cassettes' headers, traffic lines and warnings."""
    out = UnitOutput([], [], [], Counter(), Counter())
    readers: list[CassetteReader] = []
    cache = parse_cache.for_process(options.parse_cache)
    # An exchange whose parse the cache holds is read without its reads (~30% of a warm rescore's reading).
    held = (
        None if cache is None else partial(cache.holds, max_tokens=options.max_tokens, deadline_us=options.deadline_us)
    )
    for location in unit.files:
        try:
            readers.append(CassetteReader(location, skip_reads=held))
        except CassetteError as exc:
            if unit.shard == 0:
                out.warnings.append(f"{exc} (skipped)")
    if not readers:
        return out
    scorer = _UnitScorer(unit, catalog, options, readers, out, cache)
    if len(readers) > 1:
        out.order = scorer.names[0]
    # Parsing allocates ~1k short-lived acyclic objects per exchange; the cyclic GC rescanning them costs ~10%.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    counted = tick if unit.shard == 0 else None  # every shard reads the whole cassette: the first one counts it
    seen = 0
    try:
        for i, record in in_start_order([_read(r) for r in readers]):
            scorer.reading(i)
            scorer.see(record)
            seen += 1
            if counted is not None and seen % TICK == 0:
                counted(TICK)
    finally:
        if gc_was_enabled:
            gc.enable()
        if counted is not None:
            counted(seen % TICK)
        if scorer.cache is not None:
            scorer.cache.end_unit()
    if unit.shard == 0:
        scorer.describe()
    with check_deadlines():  # the deadlines' signal handler installed once for the unit's checks
        scorer.score_groups()
    return out


def _read(reader: CassetteReader) -> Iterator[Exchange]:
    """A cassette's records; damage that ends its reading ends this cassette only (a run's others read on)."""
    try:
        yield from reader
    except CassetteError as exc:
        reader.truncated, reader.error = True, str(exc)


class _UnitScorer:
    """The state of one unit while its cassette streams by: the conversations being gathered, and the counts its
    warnings report."""

    def __init__(
        self,
        unit: Unit,
        catalog: Catalog,
        options: Options,
        readers: list[CassetteReader],
        out: UnitOutput,
        cache: parse_cache.ParseCache | None,
    ) -> None:
        # A run's shards share their header but for `shard`: the first one's says what the run is.
        header = readers[0].header
        self.unit, self.catalog, self.opts, self.header, self.out = unit, catalog, options, header, out
        self.readers = readers
        self.names = [relative_name(r.path, options.base) for r in readers]
        self.replays = [0] * len(readers)
        self.cache = cache
        self.reading(0)
        self.run = header.run.id or None
        self.hashes = dict(header.run.tests) if header.run.tests is not None else None
        self.claimer = Claimer(catalog, options.rules, str(self.run or ""))
        self.groups: dict[Key, Group] = {}
        self.untagged = self.claimed = 0

    def reading(self, i: int) -> None:
        """The records seen next are the `i`th cassette's."""
        self.now = i
        self.rel = self.names[i]
        self.digest = self.readers[i].digest  # the checked payload's digest of the exchange being seen: the cache's key
        self.whole = self.readers[i].whole  # the exchange with its reads, when the reader skipped them

    def parse_once(
        self, record: Exchange, max_tokens: int | None = None, deadline_us: int | None = None
    ) -> tuple[ParsedExchange, AnswerFacts]:
        """The one place a unit parses: from the parse cache when it holds this record's parse (and its answer's
        facts, for its traffic line). Its gaps are compacted here, once, for its traffic line and its turn alike."""
        if self.cache is None:
            parsed, facts = parse_cache.parse_record(record, max_tokens, deadline_us)
        else:
            parsed, facts = self.cache.parse(
                record, self.digest, max_tokens=max_tokens, deadline_us=deadline_us, whole=self.whole
            )
        parsed.timing.itl_us = compact_itl(parsed.timing.itl_us)
        return parsed, facts

    def parse(self, record: Exchange, *, warn: bool = True) -> tuple[ParsedExchange, AnswerFacts] | None:
        try:
            return self.parse_once(record, self.opts.max_tokens, self.opts.deadline_us)
        except MALFORMED as exc:
            if warn:
                where = self.unit.location
                self.out.warnings.append(f"{where}: exchange {record.id!r} is malformed ({exc}); skipped it")
            return None

    def see(self, record: Exchange) -> None:
        self.replays[self.now] += record.replay_of is not None
        tags = record.tags
        test_id = tags.get("test")
        model = str(tags.get("model") or _body_model(record))
        if self.opts.models and model not in self.opts.models:
            return
        if (not test_id or self.opts.rules) and not self._claimed(record, model, tagged=bool(test_id)):
            return
        test = self.catalog.tests.get(str(test_id))
        if self.opts.suites and (test is None or test.suite not in self.opts.suites):
            return
        key: Key = (str(tags.get("run") or self.run or ""), model, str(test_id), to_int(tags.get("epoch")))
        if not self.unit.mine(key):
            return
        got = self.parse(record, warn=self.unit.shard == 0 or self.unit.shards == 1)
        if got is None:
            return
        parsed, facts = got
        self.out.traffic.append(traffic_entry(record, parsed, self.rel, model, facts))
        self.groups.setdefault(key, Group()).add(slim(parsed, self.rel), parsed)

    def _claimed(self, record: Exchange, model: str, tagged: bool) -> bool:
        """Untagged exchanges (and, with rules, tagged ones too): every one is some client's request, reported as
        traffic, and scored when a rule selects it or it repeats a catalog test's request. Claims are counted in
        every shard (they number epochs). Whether a tagged exchange goes on to be scored as its test."""
        claims = self.claimer.claims(record, model, tagged=tagged)
        claims = [c for c in claims if not self.opts.suites or c.spec.suite in self.opts.suites]
        self.claimed += bool(claims) and not tagged
        mine = [c for c in claims if self.unit.mine(c.key)]
        if tagged:
            if mine:
                # A malformed exchange is reported where the tagged exchange is parsed again.
                with contextlib.suppress(*MALFORMED):
                    self._add_claims(mine, self.parse_once(record)[0])
            return True
        self.untagged += 1
        reports = self.unit.reports(record.id)
        if not mine and not reports:
            return False
        got = self.parse(record)
        if got is None:
            return False
        parsed, facts = got
        if reports:
            self.out.traffic.append(traffic_entry(record, parsed, self.rel, model, facts))
        self._add_claims(mine, parsed)
        return False

    def _add_claims(self, claims: list[Claim], parsed: ParsedExchange) -> None:
        for claim in claims:
            parsed.tags = {**parsed.tags, "turn": str(claim.turn), "attempt": str(claim.attempt)}
            group = self.groups.get(claim.key)
            if group is None:
                group = self.groups[claim.key] = Group(spec=claim.spec, recorded=claim.spec.hash)
            group.add(slim(parsed, self.rel), parsed)

    def describe(self) -> None:
        """The cassettes' lines of the scores file's meta, and the warnings about them (said once, by shard 0)."""
        warnings, path = self.out.warnings, self.unit.location
        for reader in self.readers:
            if reader.problem is not None:
                warnings.append(f"{reader.problem}; scored what was read")
        if self.hashes is None:
            warnings.append(f"{path}: no per-test hashes recorded (header run.tests); staleness not checked")
        if self.untagged:
            also = f" (and the {len(self.readers) - 1} other shard(s) of its run)" if len(self.readers) > 1 else ""
            warnings.append(
                f"{path}{also}: {self.untagged} exchange(s) without an X-Bench-Test tag: reported as traffic; "
                f"{self.claimed} scored (recognised as catalog tests or selected by a rule), the others not scored"
            )
        for reader, name, replayed in zip(self.readers, self.names, self.replays, strict=True):
            header = reader.header
            self.out.cassettes.append(
                CassetteInfo(
                    path=name,
                    run=self.run,
                    created=header.created or None,
                    truncated=reader.truncated,
                    interrupted=reader.end is not None and reader.end.interrupted is True,
                    replayed=replayed,
                    settings=header.settings,
                    run_meta=header.run,
                    server=header.server if isinstance(header.server, ServerInfo) else None,
                )
            )

    def score_groups(self) -> None:
        while self.groups:
            # Popped as they are scored: a group's turns (answers, arguments) are freed as its result is made, so the
            # peak is not every turn plus every result.
            key, group = self.groups.popitem()
            test = group.spec or self.catalog.tests.get(key[2])
            if group.spec is not None:
                recorded = group.recorded
            else:
                recorded = self.hashes.get(key[2]) if self.hashes is not None else None
            # Named by its first exchange's cassette (where a run's shards hold its exchanges, each names its own).
            first = min(group.turns, key=turn_order)
            result = build_result(key, group, test, recorded, first.cassette)
            if result.status == "unknown":
                self.out.unknown[key[2]] += 1
            elif result.status == "stale":
                self.out.stale[key[2]] += 1
            elif result.failure_type == EVALUATOR_ERROR:
                self.out.check_errors.update(c.detail for c in result.checks if c.status == "error")
            self.out.results.append(result)


def build_result(key: Key, group: Group, test: TestSpec | None, recorded: str | None, rel: str) -> Result:
    run, model, test_id, epoch = key
    if test is None:
        verdict = Verdict(status="unknown")
    elif recorded is not None and recorded != test.hash:
        verdict = Verdict(status="stale")
    else:
        verdict = score_conversation(test, group.turns)
    return conversation_result(
        group.turns,
        run=run or None,
        cassette=rel,
        test=test_id,
        suite=test.suite if test else None,
        category=test.category if test else None,
        subcategory=test.subcategory if test else None,
        model=model or None,
        epoch=epoch,
        test_hash=recorded,
        catalog_test_hash=test.hash if test else None,
        settings=group.settings,
        status=verdict.status,
        score=verdict.score,
        passed=verdict.passed,
        failure_type=verdict.failure_type,
        checks=verdict.checks,
        calls=verdict.calls,
        level=group.level,
    )
