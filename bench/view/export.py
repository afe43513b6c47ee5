"""The results table as CSV: every row the current filters and sort keep, not one page, for a spreadsheet.

Cells are untrusted text (test ids, models, failure types come from cassettes and catalogs): one that a spreadsheet
would read as a formula (it starts with =, +, -, @, a tab or a carriage return) is written with a leading
apostrophe, as OWASP recommends against CSV injection.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

from bench.view.index import Row

HEADER = (
    "run", "model", "suite", "test", "epoch", "verdict", "status", "failure_type", "score", "ttft_ms", "e2el_ms",
    "output_tokens", "retries", "notes", "task_s", "calls_vs_reference",
)  # fmt: skip
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
ROWS_PER_CHUNK = 2000


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return "" if value is None else value


def _ms(us: int | None) -> str:
    return "" if us is None else f"{us / 1000:.3f}"


def _fields(r: Row) -> list[Any]:
    verdict = "pass" if r.passed is True else "fail" if r.passed is False else ""
    return [
        r.run, r.model, r.suite, r.test, r.epoch, verdict, r.status, r.failure_type, r.score, _ms(r.ttft_us),
        _ms(r.e2el_us), r.tokens, r.retries, "; ".join(r.flags), r.task_s, r.calls,
    ]  # fmt: skip


def csv_chunks(rows: Iterable[Row]) -> Iterator[bytes]:
    """The CSV (UTF-8, a header line first) in pieces of ROWS_PER_CHUNK rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(HEADER)
    for i, r in enumerate(rows, 1):
        writer.writerow([_cell(v) for v in _fields(r)])
        if i % ROWS_PER_CHUNK == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()
