"""`bench rescore`, the one way cassettes become a scores file: every cassette under the given paths, grouped into
results and scored with the catalog as it is now, written with memory bounded by the units in flight, not by the run.

`bench rescore`, `bench report` and `bench view` on cassettes, and `bench demo` all come here. Each unit's results and
traffic lines are encoded as it finishes and spilled in sorted runs (bench.scorer.sorted_runs); at the end the runs
are merged, the latest recording of each job kept, flips found by a merge join with the earlier scores file, and the
summary counted, all in one streaming pass. The file is written atomically, only if every unit was scored; its order
does not depend on `jobs`.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

import orjson

from bench import __version__
from bench.catalog.model import Catalog
from bench.core import storage
from bench.core.cassette.reader import find_locations
from bench.core.errors import BenchError
from bench.core.parse import PARSER_VERSION
from bench.scorer.checks import evaluator_versions
from bench.scorer.failures import EVALUATOR_ERROR
from bench.scorer.flips import Flip, FlipJoin, FlipMap, in_join_order
from bench.scorer.rescore_summary import Tally
from bench.scorer.results import Budgets, Meta, Result, scores_only
from bench.scorer.rules import Rule
from bench.scorer.scores_io import WRITE_BUFFER, dumps, scores_reader, write_lines
from bench.scorer.sessions import SessionLinker
from bench.scorer.sorted_runs import SPILL_BYTES, Spill, spill_dir
from bench.scorer.traffic_lines import traffic_key
from bench.scorer.unit_scoring import Options, UnitOutput
from bench.scorer.units import run_units

# Bumped when grouping, failure typing or the weighting of checks changes what the same inputs score.
SCORING_VERSION = 1
COPY_BLOCK = 1 << 20
T = TypeVar("T")


def scorer_version() -> str:
    """Derived from everything that decides a score: scoring logic, parser and every evaluator's version."""
    versions = orjson.dumps(evaluator_versions(), option=orjson.OPT_SORT_KEYS)
    return f"{SCORING_VERSION}.{PARSER_VERSION}.{hashlib.sha256(versions).hexdigest()[:8]}"


@dataclass
class Written:
    """What a rescore wrote: its meta line, the summary's counts, flips (None without an earlier file)."""

    meta: Meta
    tally: Tally
    flips: list[Flip] | None
    traffic: int


@dataclass(frozen=True)
class Request:
    """What to rescore and how: the cassettes (files, folders, URL prefixes) and the options every unit gets."""

    paths: Sequence[storage.Location]
    catalog: Catalog | None = None
    jobs: int = 1
    max_tokens: int | None = None
    deadline_s: float | None = None
    suites: Sequence[str] = ()
    models: Sequence[str] = ()
    rules: Sequence[Rule] = ()
    dask: str | None = None
    parse_cache: str | None = None  # a folder: every exchange's parse kept there (bench.scorer.parse_cache)


def rescore(
    request: Request,
    out: Path,
    *,
    base: Path | None = None,
    previous: Path | None = None,
    spill_bytes: int = SPILL_BYTES,
) -> Written:
    """Score every cassette of `request` into the scores file `out`; results name their cassettes relative to `base`
    (default: `out`'s folder); `previous`, an earlier scores file, is compared with for flips."""
    paths = request.paths
    catalog, files, opts = prepare(request, base if base is not None else out.parent)
    with contextlib.ExitStack() as stack:
        earlier = None
        if previous is not None:
            # Opened (and its meta line checked) before the run, so a wrong file fails before any work is done.
            earlier = stack.enter_context(scores_reader(previous, exchanges=False)), in_join_order(previous)
        try:
            tmp = Path(stack.enter_context(spill_dir(out.parent)))
        except OSError as exc:
            raise BenchError(f"cannot write next to {out}: {exc.strerror}; choose another --out") from None
        results, traffic = Spill(tmp, "results", spill_bytes), Spill(tmp, "traffic", spill_bytes)
        outputs = _spill_units(run_units(files, catalog, opts, jobs=request.jobs, dask=request.dask), results, traffic)
        flips: FlipJoin | FlipMap | None = None
        if earlier is not None:
            # What explains a flip (versions, budgets) is known before the merge; the warnings come after it.
            (old_meta, old), in_order = earlier
            new_meta = make_meta(catalog, opts, outputs, Counter())
            flips = FlipJoin(old_meta, new_meta, old) if in_order else FlipMap(old_meta, new_meta, old)
        body, tally, superseded = tmp / "results.jsonl", Tally(), Counter[str]()
        created = {c.path: c.created or "" for o in outputs for c in o.cassettes}
        with open(body, "wb", buffering=WRITE_BUFFER) as fh:
            decoded = ((scores_only(line), line) for _key, _unit, _seq, line in results.merged())
            for result, line in keep_latest(decoded, itemgetter(0), created, superseded):
                fh.write(line)
                tally.add(result)
                if flips is not None:
                    flips.see(result)
        meta = make_meta(catalog, opts, outputs, superseded)
        require_results(meta, tally.results, paths, traffic.count, filtered=bool(opts.suites or opts.models))
        linked = _linked(entry[3] for entry in traffic.merged())
        write_lines(out, itertools.chain([dumps(meta)], _copy(body), linked))
    return Written(meta=meta, tally=tally, flips=None if flips is None else flips.flips, traffic=traffic.count)


def _linked(lines: Iterable[bytes]) -> Iterator[bytes]:
    """Traffic lines in the file's order, each given its agent session (bench.scorer.sessions) as it passes."""
    linker = SessionLinker()
    for line in lines:
        yield linker.link_encoded(line)


def _spill_units(outputs: Iterator[tuple[int, UnitOutput]], results: Spill, traffic: Spill) -> list[UnitOutput]:
    """Each unit's lines spilled as it finishes; what stays of a unit until the end is its cassette's header and its
    warnings. The outputs in unit order."""
    done: dict[int, UnitOutput] = {}
    for i, output in outputs:
        results.add(i, ((sort_key(r), dumps(r)) for r in output.results))
        # A run's shards' lines in start order together, as one cassette's are (sessions are linked in that order).
        order = output.order
        traffic.add(
            i, ((traffic_key(t) if order is None else (order, *traffic_key(t)[1:]), dumps(t)) for t in output.traffic)
        )
        output.results, output.traffic = [], []
        done[i] = output
    return [done[i] for i in sorted(done)]


def prepare(request: Request, base: Path) -> tuple[Catalog, list[storage.Location], Options]:
    """The catalog, the cassettes found under the request's paths, and the options every unit is scored with."""
    catalog = request.catalog
    if catalog is None:
        from bench.scorer.checked_catalog import load_catalog

        catalog = load_catalog(None)
    if request.max_tokens is not None and request.max_tokens < 1:
        raise BenchError(f"--max-tokens {request.max_tokens}: give a positive number of tokens")
    if request.deadline_s is not None and request.deadline_s <= 0:
        raise BenchError(f"--deadline {request.deadline_s}: give a positive number of seconds")
    files = find_locations(list(request.paths))
    options = Options(
        base=base.resolve(),
        suites=tuple(request.suites),
        models=tuple(request.models),
        max_tokens=request.max_tokens,
        deadline_us=None if request.deadline_s is None else int(request.deadline_s * 1e6),
        rules=tuple(request.rules),
        parse_cache=request.parse_cache,
    )
    return catalog, files, options


def require_results(
    meta: Meta,
    results: Sequence[Result] | int,
    paths: Sequence[storage.Location],
    traffic: Sequence[Any] | int = (),
    *,
    filtered: bool = False,
) -> None:
    """A command that finds nothing to score or report fails with one line (after the warnings that say why)."""
    if results or traffic:
        return
    for warning in meta.warnings:
        print(f"bench: warning: {warning}", file=sys.stderr)
    where = ", ".join(str(p) for p in paths)
    read = len(meta.cassettes)
    none = "no exchange in them matches --suite/--model" if filtered else "no exchange in them"
    raise BenchError(
        f"nothing to score in {where}: {read} cassette(s) read, {none}"
        + ("; see the warnings above" if meta.warnings else "")
    )


def default_base(paths: Sequence[storage.Location]) -> Path:
    """Where the scores file goes by default: the first folder given, or the folder of the first file (the working
    directory when the first is a URL)."""
    if not paths or storage.is_url(paths[0]):
        return Path.cwd()
    first = Path(paths[0])
    return first if first.is_dir() else first.parent


def sort_key(result: Result) -> tuple[str, str, int, str, str]:
    return (result.model or "", result.test, result.epoch, result.run or "", result.cassette)


def keep_latest(
    items: Iterable[T], result_of: Callable[[T], Result], created: Mapping[str, str], superseded: Counter[str]
) -> Iterator[T]:
    """One result per (run, model, test, epoch) over a stream sorted by sort_key (what a result is carried with,
    `result_of` finds it in), holding one job's results at a time: `bench record --resume` records a job cut off
    mid-way again, whole, in a later cassette of the same run, so the latest cassette's recording is the job; the
    earlier partial one is dropped and counted per run in `superseded`. Results without a run id (traffic of other
    clients) are all kept."""
    # sort_key orders by (model, test, epoch, run, cassette): one job's results from several cassettes are adjacent.
    for (run, *_), same in groupby(items, key=lambda x: _job(result_of(x))):
        group = list(same)
        if run and len(group) > 1:
            superseded[run] += len(group) - 1
            group = [max(group, key=lambda x: (created.get(result_of(x).cassette, ""), result_of(x).cassette))]
        yield from group


def _job(r: Result) -> tuple[str | None, str | None, str, int]:
    return (r.run, r.model, r.test, r.epoch)


CHECK_ERRORS_SHOWN = 5


def check_error_warnings(errors: Counter[str]) -> list[str]:
    """One line for the checks that could not be evaluated, then their most common reasons (a few)."""
    if not errors:
        return []
    total = sum(errors.values())
    lines = [
        f"{total} check(s) could not be evaluated: their results are errored ({EVALUATOR_ERROR}), not scored; "
        "the reasons follow, and each check's detail in the scores file"
    ]
    ranked = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))
    lines.extend(f"{n} check(s): {why}" for why, n in ranked[:CHECK_ERRORS_SHOWN])
    if len(ranked) > CHECK_ERRORS_SHOWN:
        lines.append(f"{len(ranked) - CHECK_ERRORS_SHOWN} other reason(s) in the scores file")
    return lines


def make_meta(catalog: Catalog, opts: Options, outputs: Sequence[UnitOutput], superseded: Counter[str]) -> Meta:
    """The meta line: `outputs` in unit order (results may already be dropped from them), `superseded` as keep_latest
    counted them."""
    cassettes = [c for o in outputs for c in o.cassettes]
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
    warnings.extend(check_error_warnings(sum((o.check_errors for o in outputs), Counter())))
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


def _copy(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while block := fh.read(COPY_BLOCK):
            yield block
