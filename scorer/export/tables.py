"""`bench export --format parquet|csv`: a scores file as two typed tables (docs/export.md).

`results`: one row per result, its checks as a list of structs (a JSON text in CSV); `exchanges`: one row per traffic
line (every recorded exchange), with its timing, tokens, outcome, fingerprints and agent session. Columns are typed
(integers, floats, booleans, UTC timestamps, lists), so pandas, DuckDB and Polars read them as they are. Rows are
written in batches as the scores file is read: memory is one batch, not the run. Each file is written beside its
final name and renamed when complete.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.scorer.export import extra
from bench.scorer.results import CheckScore, ExchangeScore, Result, TrafficLine

BATCH = 10_000
FORMATS = ("parquet", "csv")
NAMES = ("results", "exchanges")


def _num(value: Any, kind: type) -> Any:
    """A sampling setting from a request body (untrusted) as the column's type, else null."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if kind is int:
        return int(value) if float(value).is_integer() and abs(value) < 2**63 else None
    return float(value)


def _setting_columns(pa: Any) -> list[tuple[str, Any, Callable[[dict[str, Any]], Any]]]:
    return [
        ("temperature", pa.float64(), lambda s: _num(s.get("temperature"), float)),
        ("seed", pa.int64(), lambda s: _num(s.get("seed"), int)),
        ("max_tokens", pa.int64(), lambda s: _num(s.get("max_tokens"), int)),
        ("stream", pa.bool_(), lambda s: s.get("stream") if isinstance(s.get("stream"), bool) else None),
    ]


def _check(c: CheckScore) -> dict[str, Any]:
    return {
        "evaluator": c.evaluator,
        "version": c.version,
        "weight": c.weight,
        "status": c.status,
        "score": c.score,
        "passed": c.passed,
        "detail": c.detail,
        "args": json.dumps(c.args, sort_keys=True, ensure_ascii=False),
    }


Column = tuple[str, Any, Callable[[Any], Any]]


def result_columns(pa: Any) -> list[Column]:
    check = pa.struct(
        [
            ("evaluator", pa.string()),
            ("version", pa.int32()),
            ("weight", pa.float64()),
            ("status", pa.string()),
            ("score", pa.float64()),
            ("passed", pa.bool_()),
            ("detail", pa.string()),
            ("args", pa.string()),
        ]
    )
    text = pa.string()

    def final(r: Result) -> ExchangeScore | None:
        finals = [e for e in r.exchanges if e.final] or r.exchanges
        return finals[-1] if finals else None

    columns: list[Column] = [
        ("run", text, lambda r: r.run),
        ("cassette", text, lambda r: r.cassette),
        ("model", text, lambda r: r.model),
        ("suite", text, lambda r: r.suite),
        ("category", text, lambda r: r.category),
        ("subcategory", text, lambda r: r.subcategory),
        ("test", text, lambda r: r.test),
        ("epoch", pa.int32(), lambda r: r.epoch),
        ("status", text, lambda r: r.status),
        ("score", pa.float64(), lambda r: r.score),
        ("passed", pa.bool_(), lambda r: r.passed),
        ("failure_type", text, lambda r: r.failure_type),
        ("checks_passed", pa.int32(), lambda r: sum(c.passed is True for c in r.checks)),
        ("checks_total", pa.int32(), lambda r: len(r.checks)),
        ("checks", pa.list_(check), lambda r: [_check(c) for c in r.checks]),
        ("endpoint", text, lambda r: r.endpoint),
        ("served_model", text, lambda r: r.served_model),
        ("system_fingerprint", text, lambda r: r.system_fingerprint),
        ("test_hash", text, lambda r: r.test_hash),
        ("attempts", pa.int32(), lambda r: r.attempts),
        ("retries", pa.int32(), lambda r: r.retries),
        ("exchanges", pa.int32(), lambda r: len(r.exchanges)),
        ("exchange_ids", pa.list_(text), lambda r: [e.id for e in r.exchanges]),
        ("ttft_us", pa.int64(), lambda r: getattr(final(r), "ttft_us", None)),
        ("e2el_us", pa.int64(), lambda r: getattr(final(r), "e2el_us", None)),
        ("output_tokens", pa.int64(), lambda r: getattr(final(r), "output_tokens", None)),
        ("findings", pa.list_(text), lambda r: list(r.findings)),
    ]
    columns += [(name, kind, _on_settings(get)) for name, kind, get in _setting_columns(pa)]
    return columns


def _on_settings(get: Callable[[dict[str, Any]], Any]) -> Callable[[Any], Any]:
    return lambda row: get(row.settings if isinstance(row.settings, dict) else {})


def exchange_columns(pa: Any) -> list[Column]:
    text = pa.string()
    columns: list[Column] = [
        ("cassette", text, lambda t: t.cassette),
        ("id", text, lambda t: t.id),
        ("started", pa.timestamp("us", tz="UTC"), lambda t: t.started),
        ("endpoint", text, lambda t: t.endpoint),
        ("method", text, lambda t: t.method),
        ("model", text, lambda t: t.model),
        ("served_model", text, lambda t: t.served_model),
        ("client", text, lambda t: t.client),
        ("test", text, lambda t: t.test),
        ("status", pa.int32(), lambda t: t.status),
        ("outcome", text, lambda t: t.outcome),
        ("failed", pa.bool_(), lambda t: t.failed),
        ("streamed", pa.bool_(), lambda t: t.streamed),
        ("finish_reason", text, lambda t: t.finish_reason),
        ("findings", pa.list_(text), lambda t: list(t.findings)),
        ("input_tokens", pa.int64(), lambda t: t.input_tokens),
        ("input_tokens_source", text, lambda t: t.input_tokens_source),
        ("cached_input_tokens", pa.int64(), lambda t: t.cached_input_tokens),
        ("output_tokens", pa.int64(), lambda t: t.output_tokens),
        ("tokens_source", text, lambda t: t.tokens_source),
        ("ttft_us", pa.int64(), lambda t: t.ttft_us),
        ("tpot_us", pa.float64(), lambda t: t.tpot_us),
        ("e2el_us", pa.int64(), lambda t: t.e2el_us),
        ("last_read_us", pa.int64(), lambda t: t.last_read_us),
        ("end_us", pa.int64(), lambda t: t.end_us),
        ("n_events", pa.int32(), lambda t: t.n_events),
        ("itl_us", pa.list_(pa.int64()), lambda t: list(t.itl_us) if t.itl_us is not None else None),
        ("request_fp", text, lambda t: t.request_fp),
        ("system_fingerprint", text, lambda t: t.system_fingerprint),
        ("response_id", text, lambda t: t.response_id),
        ("upstream", text, lambda t: t.upstream),
        ("session", text, lambda t: t.session),
        ("session_link", text, lambda t: t.session_link),
    ]
    columns += [(name, kind, _on_settings(get)) for name, kind, get in _setting_columns(pa)]
    return columns


def _csv_ready(pa: Any, columns: list[Column]) -> list[Column]:
    """CSV has no lists or structs: those columns become JSON text."""
    out: list[Column] = []
    for name, kind, get in columns:
        if pa.types.is_list(kind) or pa.types.is_struct(kind):
            out.append((name, pa.string(), _as_json(get)))
        else:
            out.append((name, kind, get))
    return out


def _as_json(get: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def text(row: Any) -> str | None:
        value = get(row)
        return None if value is None else json.dumps(value, ensure_ascii=False)

    return text


@dataclass
class Written:
    results: int = 0
    exchanges: int = 0
    files: tuple[Path, ...] = ()


class _Table:
    """One output file, written a batch at a time."""

    def __init__(self, pa: Any, fmt: str, path: Path, columns: list[Column]) -> None:
        self.pa, self.path, self.columns = pa, path, columns
        self.schema = pa.schema([(name, kind) for name, kind, _ in columns])
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.rows: list[Any] = []
        self.count = 0
        if fmt == "parquet":
            self.writer: Any = extra("pyarrow.parquet", "tables", "--format parquet").ParquetWriter(
                str(self.tmp), self.schema
            )
        else:
            self.writer = extra("pyarrow.csv", "tables", "--format csv").CSVWriter(str(self.tmp), self.schema)

    def add(self, row: Any) -> None:
        self.rows.append(row)
        if len(self.rows) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        arrays = [self.pa.array([get(r) for r in self.rows], type=kind) for _, kind, get in self.columns]
        self.writer.write_table(self.pa.Table.from_arrays(arrays, schema=self.schema))
        self.count += len(self.rows)
        self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()
        os.replace(self.tmp, self.path)

    def abandon(self) -> None:
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


def export_tables(lines: Iterable[Result | TrafficLine], out: Path, fmt: str) -> Written:
    """Write `out`/results.FMT and `out`/exchanges.FMT from a scores file's lines (results and traffic lines)."""
    if fmt not in FORMATS:
        raise BenchError(f"--format {fmt}: tables are written as {' or '.join(FORMATS)}")
    pa = extra("pyarrow", "tables", f"--format {fmt}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"cannot write to {out}: {exc.strerror}; choose another --out") from None
    specs = [result_columns(pa), exchange_columns(pa)]
    if fmt == "csv":
        specs = [_csv_ready(pa, s) for s in specs]
    with ExitStack() as stack:
        tables = []
        for name, columns in zip(NAMES, specs, strict=True):
            table = _Table(pa, fmt, out / f"{name}.{fmt}", columns)
            stack.callback(table.abandon)
            tables.append(table)
        results, exchanges = tables
        for line in lines:
            (results if isinstance(line, Result) else exchanges).add(line)
        stack.pop_all()
        for table in tables:
            table.close()
    return Written(results.count, exchanges.count, (results.path, exchanges.path))
