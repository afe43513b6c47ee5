"""Server-side filter, sort and paging of the results table, so the browser never holds 100,000 rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import msgspec

from bench.view.index import Row
from bench.view.search import SearchState

SORTABLE = (
    "n",
    "run",
    "model",
    "suite",
    "test",
    "epoch",
    "passed",
    "failure_type",
    "score",
    "ttft_us",
    "e2el_us",
    "tokens",
    "retries",
    "flags",
    "task_s",
    "calls",
)
MAX_LIMIT = 500
# What the results table's verdict filter keeps: "errored" are results that failed in transport (no verdict, left out
# of pass rates), "unscored" every other result without a verdict (untagged traffic, skipped, stale, unknown).
VERDICTS: dict[str, Callable[[Row], bool]] = {
    "pass": lambda r: r.passed is True,
    "fail": lambda r: r.passed is False,
    "errored": lambda r: r.status == "errored",
    "unscored": lambda r: r.passed is None and r.status != "errored",
}


class Query(msgspec.Struct):
    run: str | None = None
    model: str | None = None
    suite: str | None = None
    failure_type: str | None = None
    verdict: str | None = None  # pass | fail | errored | unscored (the `passed` parameter)
    q: str | None = None  # words the test id, or a prompt or answer of the result, holds
    sort: str = "n"
    desc: bool = False
    offset: int = 0
    limit: int = 50


class Page(msgspec.Struct):
    total: int
    offset: int
    limit: int
    rows: list[Row]
    search: SearchState | None = None  # how far the text search has gone (with q)
    snippets: dict[int, str] = msgspec.field(default_factory=dict)  # row n -> the text around its match


def parse_query(params: Mapping[str, str]) -> Query:
    """A Query from URL parameters; ValueError with one line naming the bad parameter and what it accepts."""
    verdict = params.get("passed") or None
    if verdict is not None and verdict not in VERDICTS:
        raise ValueError(f"passed={verdict[:20]!r}: use one of {', '.join(VERDICTS)}")
    sort = params.get("sort") or "n"
    if sort not in SORTABLE:
        raise ValueError(f"sort={sort!r}: use one of {', '.join(SORTABLE)}")
    numbers = {}
    for name, default in (("offset", 0), ("limit", 50)):
        text = params.get(name) or str(default)
        if not text.isdigit() or len(text) > 9:
            raise ValueError(f"{name}={text[:20]!r}: use a whole number >= 0 of at most 9 digits")
        numbers[name] = int(text)
    if not 1 <= numbers["limit"] <= MAX_LIMIT:
        raise ValueError(f"limit={numbers['limit']}: use 1 to {MAX_LIMIT}")
    return Query(
        run=params.get("run") or None,
        model=params.get("model") or None,
        suite=params.get("suite") or None,
        failure_type=params.get("failure_type") or None,
        verdict=verdict,
        q=params.get("q") or None,
        sort=sort,
        desc=params.get("desc") in ("1", "true"),
        offset=numbers["offset"],
        limit=numbers["limit"],
    )


def select(rows: Sequence[Row], query: Query, text: bytearray | None = None) -> list[Row]:
    """The rows the query keeps, sorted. `text`: per row, whether its prompts or answers hold the query's words
    (bench.view.search); a row is kept when its test id or its text holds them."""
    needle = query.q.lower() if query.q is not None else None
    selected = [
        r for r in rows if _keep(r, query) and (needle is None or needle in r.test.lower() or (text and text[r.n]))
    ]
    if query.sort != "n" or query.desc:
        # None sorts last in either direction: a missing TTFT is not the fastest.
        present = [r for r in selected if getattr(r, query.sort) is not None]
        missing = [r for r in selected if getattr(r, query.sort) is None]
        present.sort(key=lambda r: getattr(r, query.sort), reverse=query.desc)
        selected = present + missing
    return selected


def page(rows: Sequence[Row], query: Query, text: bytearray | None = None) -> Page:
    selected = select(rows, query, text)
    return Page(len(selected), query.offset, query.limit, selected[query.offset : query.offset + query.limit])


def _keep(r: Row, q: Query) -> bool:
    return (
        (q.run is None or r.run == q.run)
        and (q.model is None or r.model == q.model)
        and (q.suite is None or r.suite == q.suite)
        and (q.failure_type is None or r.failure_type == q.failure_type)
        and (q.verdict is None or VERDICTS[q.verdict](r))
    )
