"""`rescore`: every cassette under the given paths, grouped into results and scored with the catalog as it is now.

Work is split into units (a cassette, or one shard of a large cassette when there are fewer cassettes than jobs); a unit
streams its cassette with CassetteReader and keeps only the results whose key hashes to its shard, parsed at once and
slimmed (bench.scorer.context.Turn), so raw chunks never accumulate. Units run in a process pool forked after the
catalog is loaded. Results are sorted before they are returned, so the output does not depend on `jobs`."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
import multiprocessing
import os
import sys
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any, TypeVar

import orjson

from bench import __version__
from bench.catalog.model import Catalog, TestSpec
from bench.core import storage
from bench.core.cassette import CassetteReader
from bench.core.cassette.reader import find_locations
from bench.core.cassette.records import Exchange, Header
from bench.core.endpoints import endpoint_of
from bench.core.errors import BenchError, CassetteError
from bench.core.parse import PARSER_VERSION, parse_exchange
from bench.core.parsed import ParsedExchange
from bench.scorer.checks import evaluator_versions
from bench.scorer.context import Turn
from bench.scorer.recognise import Recogniser
from bench.scorer.results import Budgets, CassetteInfo, Meta, Result, Verdict
from bench.scorer.rules import Rule, as_chat, rule_spec
from bench.scorer.scoring import conversation_result, request_settings, score_conversation, slim, to_int
from bench.scorer.traffic_lines import traffic_entry, traffic_key
from bench.workspace import sandbox

# Bumped when grouping, failure typing or the weighting of checks changes what the same inputs score.
SCORING_VERSION = 1
SHARD_MIN_BYTES = 32 << 10
# Cassettes fetched ahead from object storage by an in-process rescore: each is held whole until its unit runs, so
# this many cassettes' compressed bytes is the memory it costs.
PREFETCH = 4
# Units submitted to the pool ahead of the ones running: keeps workers busy while finished outputs wait to be read.
AHEAD_PER_WORKER = 2

Key = tuple[str, str, str, int]  # run, model, test, epoch
T = TypeVar("T")


def scorer_version() -> str:
    """Derived from everything that decides a score: scoring logic, parser and every evaluator's version."""
    versions = orjson.dumps(evaluator_versions(), option=orjson.OPT_SORT_KEYS)
    return f"{SCORING_VERSION}.{PARSER_VERSION}.{hashlib.sha256(versions).hexdigest()[:8]}"


@dataclass(frozen=True)
class Options:
    base: Path
    suites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    max_tokens: int | None = None
    deadline_us: int | None = None
    rules: tuple[Rule, ...] = ()


@dataclass
class Group:
    turns: list[Turn] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    first: tuple[int, int] | None = None
    # Set for untagged exchanges claimed by a rule or recognised as a catalog test: the test to score them with, and
    # the hash they count as recorded with (their request is the test's, so they are not stale).
    spec: TestSpec | None = None
    recorded: str | None = None


@dataclass(frozen=True)
class Claim:
    """An untagged exchange claimed for scoring: by a rule, or as a repeat of a catalog test's request."""

    key: Key
    spec: TestSpec
    turn: int
    attempt: int


@dataclass
class UnitOutput:
    cassette: CassetteInfo | None
    results: list[Result]
    warnings: list[str]
    unknown: Counter[str]
    stale: Counter[str]
    traffic: list[dict[str, Any]] = field(default_factory=list)


# Set in the parent before the pool forks, so that workers share the loaded catalog instead of pickling it.
_catalog: Catalog | None = None
_options: Options | None = None


def rescore(
    paths: Sequence[storage.Location],
    *,
    catalog: Catalog | None = None,
    jobs: int = 1,
    max_tokens: int | None = None,
    deadline_s: float | None = None,
    suites: Sequence[str] = (),
    models: Sequence[str] = (),
    base: Path | None = None,
    traffic: list[dict[str, Any]] | None = None,
    rules: Sequence[Rule] = (),
    dask: str | None = None,
) -> tuple[Meta, list[Result]]:
    """Score every cassette under `paths`; returns the scores file's meta line and its sorted result lines.
    `traffic`, when given, receives one traffic line per exchange, tagged or not (bench.scorer.traffic_lines), sorted.
    `dask` (a scheduler address, or local[:N]) runs the units as Dask tasks instead (bench.scorer.distributed).
    Holds every result: `bench.scorer.merge.rescore_to_file` writes the same file with memory bounded by the units in
    flight."""
    catalog, files, options = prepare(
        paths,
        catalog=catalog,
        max_tokens=max_tokens,
        deadline_s=deadline_s,
        suites=suites,
        models=models,
        base=base,
        rules=rules,
    )
    outputs: list[UnitOutput | None] = []
    for i, output in unit_outputs(files, catalog, options, jobs=jobs, dask=dask):
        outputs.extend([None] * (i + 1 - len(outputs)))
        outputs[i] = output
    done = [o for o in outputs if o is not None]
    if traffic is not None:
        traffic.extend(sorted((t for o in done for t in o.traffic), key=traffic_key))
    return assemble(catalog, options, done, files)


def prepare(
    paths: Sequence[storage.Location],
    *,
    catalog: Catalog | None = None,
    max_tokens: int | None = None,
    deadline_s: float | None = None,
    suites: Sequence[str] = (),
    models: Sequence[str] = (),
    base: Path | None = None,
    rules: Sequence[Rule] = (),
) -> tuple[Catalog, list[storage.Location], Options]:
    """The catalog, the cassettes found under `paths`, and the options every unit is scored with."""
    if catalog is None:
        from bench.scorer.checked_catalog import load_catalog

        catalog = load_catalog(None)
    if max_tokens is not None and max_tokens < 1:
        raise BenchError(f"--max-tokens {max_tokens}: give a positive number of tokens")
    if deadline_s is not None and deadline_s <= 0:
        raise BenchError(f"--deadline {deadline_s}: give a positive number of seconds")
    files = find_locations(list(paths))
    options = Options(
        base=(base if base is not None else default_base(paths)).resolve(),
        suites=tuple(suites),
        models=tuple(models),
        max_tokens=max_tokens,
        deadline_us=None if deadline_s is None else int(deadline_s * 1e6),
        rules=tuple(rules),
    )
    return catalog, files, options


def unit_outputs(
    files: list[storage.Location], catalog: Catalog, options: Options, *, jobs: int = 1, dask: str | None = None
) -> Iterator[tuple[int, UnitOutput]]:
    """(unit index, output) for every unit, as units finish: in-process, in a process pool, or on Dask. At most a
    few units per worker are submitted ahead, so finished outputs waiting to be consumed stay few."""
    global _catalog, _options
    if dask is not None:
        yield from _rescore_dask(dask, files, catalog, options)
        return
    units = plan_units(files, max(1, jobs))
    _catalog, _options = catalog, options
    try:
        if jobs <= 1 or len(units) <= 1:
            # Cassettes on object storage are fetched a few ahead while one is scored (see storage.Prefetch).
            with storage.prefetching(PREFETCH if any(storage.is_url(u[0]) for u in units) else 0) as ahead:
                for i, unit in enumerate(units):
                    if ahead is not None:
                        ahead.want([str(u[0]) for u in units[i : i + 1 + PREFETCH] if storage.is_url(u[0])])
                    yield i, score_unit(unit)
            return
        ctx = multiprocessing.get_context("fork")
        slots = ctx.BoundedSemaphore(max(1, os.cpu_count() or 1))
        workers = min(jobs, len(units))
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=sandbox.set_semaphore, initargs=(slots,)
        ) as pool:
            todo = iter(enumerate(units))
            pending: dict[Future[UnitOutput], int] = {}
            for i, unit in itertools.islice(todo, AHEAD_PER_WORKER * workers):
                pending[pool.submit(score_unit, unit)] = i
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    i = pending.pop(future)
                    for j, unit in itertools.islice(todo, 1):
                        pending[pool.submit(score_unit, unit)] = j
                    yield i, future.result()
    finally:
        _catalog, _options = None, None


def require_results(
    meta: Meta, results: Sequence[Result] | int, paths: Sequence[storage.Location], traffic: Sequence[Any] | int = ()
) -> None:
    """A command that finds nothing to score or report fails with one line (after the warnings that say why)."""
    if results or traffic:
        return
    for warning in meta.warnings:
        print(f"bench: warning: {warning}", file=sys.stderr)
    where = ", ".join(str(p) for p in paths)
    read = len(meta.cassettes)
    raise BenchError(
        f"nothing to score in {where}: {read} cassette(s) read, no exchange in them"
        + ("; see the warnings above" if meta.warnings else "")
    )


def _rescore_dask(
    spec: str, files: list[storage.Location], catalog: Catalog, options: Options
) -> Iterator[tuple[int, UnitOutput]]:
    from bench.scorer import distributed

    distributed.import_distributed()  # a missing extra is reported before the files are planned
    with distributed.connect(spec) as client:
        units = distributed.resolve_local(plan_units(files, distributed.workers_of(client)))
        yield from distributed.iter_units(client, units, catalog, options)


def default_base(paths: Sequence[storage.Location]) -> Path:
    """Where the scores file goes by default: the first folder given, or the folder of the first file (the working
    directory when the first is a URL)."""
    if not paths or storage.is_url(paths[0]):
        return Path.cwd()
    first = Path(paths[0])
    return first if first.is_dir() else first.parent


def plan_units(files: Sequence[storage.Location], jobs: int) -> list[tuple[storage.Location, int, int]]:
    """(cassette, shard, shards): large cassettes are split when there are too few to keep every job busy."""
    shards_each = 1
    if jobs > 1 and len(files) < 2 * jobs:
        shards_each = jobs
    units: list[tuple[storage.Location, int, int]] = []
    for path in files:
        n = shards_each if storage.size(path) >= SHARD_MIN_BYTES else 1
        units.extend((path, i, n) for i in range(n))
    return units


def _rel(path: storage.Location, base: Path) -> str:
    """How a result names its cassette: relative to the scores file's folder, or the URL of one on object storage."""
    return str(path) if storage.is_url(path) else os.path.relpath(Path(path).resolve(), base)


def _run_id(header: Header) -> str | None:
    return header.run.id or None


def _recorded_hashes(header: Header) -> dict[str, str] | None:
    return dict(header.run.tests) if header.run.tests is not None else None


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


def score_unit(unit: tuple[storage.Location, int, int]) -> UnitOutput:
    path, shard, shards = unit
    assert _catalog is not None and _options is not None
    catalog, opts = _catalog, _options
    rel = _rel(path, opts.base)
    out = UnitOutput(None, [], [], Counter(), Counter())
    try:
        reader = CassetteReader(path)
    except CassetteError as exc:
        if shard == 0:
            out.warnings.append(f"{exc} (skipped)")
        return out
    header = reader.header
    header_run = _run_id(header)
    hashes = _recorded_hashes(header)
    groups: dict[Key, Group] = {}
    untagged = exchanges = claimed = 0
    claimer = Claimer(catalog, opts.rules, str(header_run or ""))
    # Parsing allocates ~1k short-lived acyclic objects per exchange; the cyclic GC rescanning them costs ~10%.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for record in reader:
            exchanges += 1
            tags = record.tags
            test_id = tags.get("test")
            model = str(tags.get("model") or _body_model(record))
            if opts.models and model not in opts.models:
                continue
            if not test_id or opts.rules:
                # Every exchange is some client's request: reported as traffic, and scored when a rule selects it
                # or it repeats a catalog test's request. Claims are counted in every shard (they number epochs).
                claims = claimer.claims(record, model, tagged=bool(test_id))
                claims = [c for c in claims if not opts.suites or c.spec.suite in opts.suites]
                claimed += bool(claims) and not test_id
                mine = [c for c in claims if shards == 1 or zlib.crc32(repr(c.key).encode()) % shards == shard]
                if not test_id:
                    untagged += 1
                    reports = shards == 1 or zlib.crc32(record.id.encode()) % shards == shard
                    if not mine and not reports:
                        continue
                    try:
                        parsed = parse_exchange(record, max_tokens=opts.max_tokens, deadline_us=opts.deadline_us)
                    except (KeyError, TypeError, ValueError, AttributeError) as exc:
                        out.warnings.append(f"{path}: exchange {record.id!r} is malformed ({exc}); skipped it")
                        continue
                    if reports:
                        out.traffic.append(traffic_entry(record, parsed, rel, model))
                    _add_claims(groups, mine, parsed)
                    continue
                if mine:
                    # A malformed exchange is reported below, where the tagged exchange is parsed again.
                    with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
                        _add_claims(groups, mine, parse_exchange(record))
            test = catalog.tests.get(test_id)
            if opts.suites and (test is None or test.suite not in opts.suites):
                continue
            key: Key = (str(tags.get("run") or header_run or ""), str(model), str(test_id), to_int(tags.get("epoch")))
            if shards > 1 and zlib.crc32(repr(key).encode()) % shards != shard:
                continue
            try:
                parsed = parse_exchange(record, max_tokens=opts.max_tokens, deadline_us=opts.deadline_us)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                if shard == 0 or shards == 1:
                    out.warnings.append(f"{path}: exchange {record.id!r} is malformed ({exc}); skipped it")
                continue
            out.traffic.append(traffic_entry(record, parsed, rel, model))
            turn = slim(parsed)
            group = groups.setdefault(key, Group())
            group.turns.append(turn)
            order = (turn.turn, turn.attempt)
            if group.first is None or order < group.first:
                group.first, group.settings = order, request_settings(parsed)
    except CassetteError as exc:
        reader.truncated, reader.error = True, str(exc)
    finally:
        if gc_was_enabled:
            gc.enable()
    if shard == 0:
        if reader.problem is not None:
            out.warnings.append(f"{reader.problem}; scored what was read")
        if hashes is None:
            out.warnings.append(f"{path}: no per-test hashes recorded (header run.tests); staleness not checked")
        if untagged:
            out.warnings.append(
                f"{path}: {untagged} exchange(s) without an X-Bench-Test tag: reported as traffic; "
                f"{claimed} scored (recognised as catalog tests or selected by a rule), the others not scored"
            )
        out.cassette = CassetteInfo(
            path=rel,
            run=header_run,
            created=header.created or None,
            truncated=reader.truncated,
            settings=header.settings,
            run_meta=header.run,
        )
    while groups:
        # Popped as they are scored: a group's turns (answers, arguments) are freed as its result is made, so the
        # peak is not every turn plus every result.
        key, group = groups.popitem()
        test = group.spec or catalog.tests.get(key[2])
        recorded = group.recorded if group.spec is not None else hashes.get(key[2]) if hashes is not None else None
        result = build_result(key, group, test, recorded, rel)
        if result.status == "unknown":
            out.unknown[key[2]] += 1
        elif result.status == "stale":
            out.stale[key[2]] += 1
        out.results.append(result)
    return out


def _add_claims(groups: dict[Key, Group], claims: list[Claim], parsed: ParsedExchange) -> None:
    for claim in claims:
        parsed.tags = {**parsed.tags, "turn": str(claim.turn), "attempt": str(claim.attempt)}
        turn = slim(parsed)
        group = groups.get(claim.key)
        if group is None:
            group = groups[claim.key] = Group(spec=claim.spec, recorded=claim.spec.hash)
        group.turns.append(turn)
        order = (turn.turn, turn.attempt)
        if group.first is None or order < group.first:
            group.first, group.settings = order, request_settings(parsed)


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
    )


def sort_key(result: Result) -> tuple[str, str, int, str, str]:
    return (result.model or "", result.test, result.epoch, result.run or "", result.cassette)


def latest_recordings(results: list[Result], cassettes: list[CassetteInfo]) -> tuple[list[Result], Counter[str]]:
    """One result per (run, model, test, epoch): `bench record --resume` records a job cut off mid-way again, whole,
    in a later cassette of the same run, so the latest cassette's recording is the job; the earlier partial one is
    dropped and counted per run. Results without a run id (traffic of other clients) are all kept."""
    superseded: Counter[str] = Counter()
    kept = list(keep_latest(results, lambda r: r, {c.path: c.created or "" for c in cassettes}, superseded))
    return kept, superseded


def keep_latest(
    items: Iterable[T], result_of: Callable[[T], Result], created: Mapping[str, str], superseded: Counter[str]
) -> Iterator[T]:
    """latest_recordings over a stream sorted by sort_key (what a result is carried with, `result_of` finds it in),
    holding one job's results at a time; counts what it drops in `superseded`."""
    # sort_key orders by (model, test, epoch, run, cassette): one job's results from several cassettes are adjacent.
    for (run, *_), same in groupby(items, key=lambda x: _job(result_of(x))):
        group = list(same)
        if run and len(group) > 1:
            superseded[run] += len(group) - 1
            group = [max(group, key=lambda x: (created.get(result_of(x).cassette, ""), result_of(x).cassette))]
        yield from group


def _job(r: Result) -> tuple[str | None, str | None, str, int]:
    return (r.run, r.model, r.test, r.epoch)


def assemble(
    catalog: Catalog, opts: Options, outputs: list[UnitOutput], files: list[storage.Location]
) -> tuple[Meta, list[Result]]:
    cassettes = [o.cassette for o in outputs if o.cassette is not None]
    results, superseded = latest_recordings(sorted((r for o in outputs for r in o.results), key=sort_key), cassettes)
    return make_meta(catalog, opts, outputs, superseded), results


def make_meta(catalog: Catalog, opts: Options, outputs: Sequence[UnitOutput], superseded: Counter[str]) -> Meta:
    """The meta line: `outputs` in unit order (results may already be dropped from them), `superseded` as
    latest_recordings counted them."""
    cassettes = [o.cassette for o in outputs if o.cassette is not None]
    warnings = [w for o in outputs for w in o.warnings]
    for run, n in sorted(superseded.items()):
        warnings.append(
            f"run {run!r}: {n} job(s) recorded in more than one cassette (a resumed run records a job cut off "
            "mid-way again, whole); scored each one's latest recording only"
        )
    unknown: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    for o in outputs:
        unknown.update(o.unknown)
        stale.update(o.stale)
    for test_id, n in sorted(unknown.items()):
        warnings.append(f"unknown test id {test_id!r} ({n} result(s)): not in the catalog, reported as unknown")
    for test_id, n in sorted(stale.items()):
        warnings.append(
            f"test {test_id!r} changed since it was recorded ({n} result(s)): "
            "reported as stale, not scored; re-record it"
        )
    return Meta(
        bench_version=__version__,
        scorer_version=scorer_version(),
        parser_version=PARSER_VERSION,
        scoring_version=SCORING_VERSION,
        catalog_hash=catalog.hash,
        evaluators=evaluator_versions(),
        budgets=Budgets(
            max_tokens=opts.max_tokens, deadline_s=None if opts.deadline_us is None else opts.deadline_us / 1e6
        ),
        cassettes=cassettes,
        warnings=warnings,
    )
