"""The one rescore path (bench.scorer.rescore) as tests read its outcome: the scores file it writes, read back."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.catalog.model import Catalog
from bench.core.storage import Location
from bench.scorer.rescore import Request, default_base, rescore
from bench.scorer.results import Meta, Result
from bench.scorer.rules import Rule
from bench.scorer.scores_io import read_scores


def rescored(
    paths: Sequence[Location],
    *,
    catalog: Catalog | None = None,
    jobs: int = 1,
    max_tokens: int | None = None,
    deadline_s: float | None = None,
    suites: Sequence[str] = (),
    models: Sequence[str] = (),
    rules: Sequence[Rule] = (),
    dask: str | None = None,
    base: Path | None = None,
    traffic: list[dict[str, Any]] | None = None,
) -> tuple[Meta, list[Result]]:
    """The meta line and results of a rescore of `paths` (and its traffic lines, into `traffic` when given), as the
    scores file `bench rescore` would write beside them holds them."""
    request = Request(
        paths,
        catalog=catalog,
        jobs=jobs,
        max_tokens=max_tokens,
        deadline_s=deadline_s,
        suites=suites,
        models=models,
        rules=rules,
        dask=dask,
    )
    with tempfile.TemporaryDirectory(prefix="bench-test-rescore-") as tmp:
        out = Path(tmp) / "scores.jsonl"
        rescore(request, out, base=base if base is not None else default_base(paths))
        lines: list[dict[str, Any]] = []
        meta, results = read_scores(out, traffic=lines)
    if traffic is not None:
        traffic.extend(lines)
    return meta, results
