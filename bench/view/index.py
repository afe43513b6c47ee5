"""What `bench view` serves, loaded once: every result of every scores source, as typed rows, plus the runs.

Scores are read with the scorer's own loader (a scores file, or a folder rescored in memory); a result's exchanges
are read from its cassette only when one result is opened, so a run of 100,000 exchanges costs one row each here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from bench.cassette import CassetteReader
from bench.errors import BenchError, CassetteError
from scorer.report.load import Scores, load
from scorer.report.stats import wilson
from scorer.results import ExchangeScore, Meta, Result

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


class Index:
    def __init__(self, sources: list[Scores]) -> None:
        self.sources = sources
        self.rows: list[Row] = []
        self._recent: dict[int, dict[str, dict[str, Any]]] = {}
        self.results: list[Result] = []
        self.by_key: dict[tuple[str, str, str, int], int] = {}
        for s, scores in enumerate(sources):
            for result in [*scores.results, *_untagged(scores)]:
                row = _row(len(self.rows), s, result)
                self.by_key[(row.run, row.model, row.test, row.epoch)] = row.n
                self.rows.append(row)
                self.results.append(result)
        self.runs = _runs(self)
        self.facets = {
            "run": sorted({r.run for r in self.rows}),
            "model": sorted({r.model for r in self.rows}),
            "suite": sorted({r.suite for r in self.rows}),
            "failure_type": sorted({r.failure_type for r in self.rows if r.failure_type}),
        }

    def find(self, run: str, model: str, test: str, epoch: int) -> int:
        n = self.by_key.get((run, model, test, epoch))
        if n is None:
            raise KeyError(f"no result for run {run!r}, model {model!r}, test {test!r}, epoch {epoch}")
        return n

    def cassette_path(self, n: int) -> Path:
        return self.sources[self.rows[n].source].base / self.results[n].cassette

    def records(self, n: int) -> dict[str, dict[str, Any]]:
        """The result's exchange records by id, read from its cassette (a streaming scan that stops when all are
        found, so memory stays one record at a time). The last few results read are kept: opening a result and then
        its raw bytes, or the two sides of a flip, scans once."""
        if n in self._recent:
            self._recent[n] = self._recent.pop(n)
            return self._recent[n]
        found = self._scan(n)
        self._recent[n] = found
        while len(self._recent) > RECENT:
            del self._recent[next(iter(self._recent))]
        return found

    def _scan(self, n: int) -> dict[str, dict[str, Any]]:
        wanted = {e.id for e in self.results[n].exchanges}
        found: dict[str, dict[str, Any]] = {}
        if not wanted:
            return found
        try:
            for record in CassetteReader(self.cassette_path(n)):
                if str(record.get("id")) in wanted:
                    found[str(record.get("id"))] = record
                    if len(found) == len(wanted):
                        break
        except (CassetteError, OSError) as exc:
            raise BenchError(f"cannot read the cassette of this result: {exc}") from None
        return found


UNTAGGED = "untagged"


def _untagged(scores: Scores) -> list[Result]:
    """Exchanges that no result covers (untagged traffic no rule scored), as unscored results of the run
    "untagged", suite = endpoint and test = cassette#id, so they browse like any result."""
    covered = {(r.cassette, e.id) for r in scores.results for e in r.exchanges}
    found = []
    for entry in scores.traffic:
        key = (str(entry.get("cassette")), str(entry.get("id")))
        if key in covered:
            continue
        found.append(
            Result(
                run=UNTAGGED,
                model=entry.get("model") or entry.get("served_model") or "",
                suite=entry.get("endpoint") or "",
                test=f"{key[0]}#{key[1]}",
                epoch=0,
                passed=None,
                status="unscored",
                cassette=key[0],
                system_fingerprint=entry.get("system_fingerprint"),
                findings=list(entry.get("findings") or []),
                exchanges=[
                    ExchangeScore(
                        id=key[1],
                        outcome=str(entry.get("outcome") or ""),
                        status=entry.get("status"),
                        final=True,
                        ttft_us=entry.get("ttft_us"),
                        e2el_us=entry.get("e2el_us"),
                        tpot_us=entry.get("tpot_us"),
                        itl_us=entry.get("itl_us"),
                        output_tokens=entry.get("output_tokens"),
                        tokens_source=entry.get("tokens_source"),
                        n_events=int(entry.get("n_events") or 0),
                    )
                ],
            )
        )
    return found


def _final(result: Result) -> ExchangeScore:
    finals = [e for e in result.exchanges if e.final]
    return (finals or result.exchanges or [ExchangeScore()])[-1]


def _row(n: int, source: int, r: Result) -> Row:
    final = _final(r)
    return Row(
        n=n,
        run=r.run or "",
        model=r.model or "",
        suite=r.suite or "",
        test=r.test,
        epoch=r.epoch,
        passed=r.passed,
        failure_type=r.failure_type,
        score=r.score,
        ttft_us=final.ttft_us,
        e2el_us=final.e2el_us,
        tokens=final.output_tokens,
        retries=r.retries,
        source=source,
    )


def _runs(index: Index) -> list[Run]:
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    fingerprints: dict[str, set[str]] = defaultdict(set)
    first: dict[str, int] = {}
    for row, result in zip(index.rows, index.results, strict=True):
        c = counts[row.run][row.model]
        # As in the reports: results that errored in transport (status "errored") are left out of pass rates.
        if result.status == "scored":
            c[1] += 1
            c[0] += row.passed is True
        first.setdefault(row.run, row.n)
        if result.system_fingerprint:
            fingerprints[row.run].add(result.system_fingerprint)
    runs = []
    for run_id, models in counts.items():
        n0 = first[run_id]
        source = index.sources[index.rows[n0].source]
        rates = []
        for model, (passed, n) in sorted(models.items()):
            low, high = wilson(passed, n)
            rates.append(ModelRate(model, passed, n, passed / n if n else 0.0, low, high))
        runs.append(
            Run(
                id=run_id,
                source=source.source,
                models=rates,
                settings=dict(index.results[n0].settings),
                fingerprints=sorted(fingerprints[run_id]),
                catalog_hash=_catalog_hash(source.meta, run_id),
                results=sum(1 for r in index.rows if r.run == run_id),
            )
        )
    return runs


def _catalog_hash(meta: Meta, run_id: str) -> str | None:
    for cassette in meta.cassettes:
        if cassette.run == run_id and cassette.run_meta.catalog_hash:
            return cassette.run_meta.catalog_hash
    return None


def open_index(paths: Iterable[Path]) -> Index:
    """Load every PATH (a scores file, a folder with scores.jsonl, or cassettes to rescore in memory)."""
    index = Index([load(Path(p)) for p in paths])
    if not index.rows:
        raise BenchError("no results and no exchanges in the given paths; record a run or run `bench rescore PATH`")
    return index
