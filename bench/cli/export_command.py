"""`bench export`: results and recordings in the formats other tools read (docs/export.md): Parquet or CSV tables of
results and exchanges, and OpenTelemetry GenAI traces and metrics (OTLP over HTTP, or an OTLP JSON Lines file)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.storage import location

FORMATS = ("parquet", "csv", "otlp")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export",
        help="results and exchanges as Parquet/CSV, or recordings as OpenTelemetry GenAI traces and metrics",
        description="Export a scores file, or a folder of cassettes (its scores.jsonl, else rescored).",
    )
    p.add_argument("path", type=location, metavar="PATH", help="scores file, or folder of cassettes (or a URL)")
    p.add_argument("--format", choices=FORMATS, required=True, help="parquet or csv: two tables; otlp: traces, metrics")
    p.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="parquet/csv: the folder for results.* and exchanges.*; otlp: an OTLP JSON Lines file (or --endpoint)",
    )
    p.add_argument(
        "--endpoint", metavar="URL", help="otlp: the receiver's OTLP/HTTP base URL (/v1/traces, /v1/metrics are added)"
    )
    p.add_argument(
        "--protocol",
        choices=("http/protobuf", "http/json"),
        default="http/protobuf",
        help="otlp --endpoint: the OTLP/HTTP encoding (default http/protobuf)",
    )
    p.add_argument(
        "--signals",
        default="traces,metrics",
        metavar="LIST",
        help="otlp: traces, metrics or both (default traces,metrics; a receiver without metrics takes traces)",
    )
    p.add_argument(
        "--content",
        action="store_true",
        help="otlp: add the prompts and answers (gen_ai.input.messages, gen_ai.output.messages), secrets redacted "
        "as in cassettes; read from the cassettes",
    )
    p.add_argument("--service-name", default="bench", metavar="NAME", help="otlp: the resource's service.name")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="processes when rescoring cassettes")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise BenchError(f"--jobs {args.jobs}: give at least 1")
    if args.format == "otlp":
        return _otlp(args)
    if args.out is None:
        raise BenchError(f"--format {args.format} writes two files: give --out FOLDER")
    from bench.scorer.export.tables import export_tables
    from bench.scorer.report import load

    with load.stream(args.path, jobs=args.jobs) as scores:
        written = export_tables(scores.lines, args.out, args.format)
    print(f"{written.results} result(s) -> {written.files[0]}")
    print(f"{written.exchanges} exchange(s) -> {written.files[1]}")
    return 0


def _otlp(args: argparse.Namespace) -> int:
    from bench.scorer.export.otlp import Target, export_otlp
    from bench.scorer.report import load

    if (args.endpoint is None) == (args.out is None):
        raise BenchError("--format otlp: give --endpoint URL (an OTLP/HTTP receiver) or --out FILE (OTLP JSON Lines)")
    signals = {s.strip() for s in args.signals.split(",") if s.strip()}
    if not signals or not signals <= {"traces", "metrics"}:
        raise BenchError(f"--signals {args.signals}: give traces, metrics or traces,metrics")
    target = Target(
        endpoint=args.endpoint,
        file=args.out,
        protocol=args.protocol,
        traces="traces" in signals,
        metrics="metrics" in signals,
        content=args.content,
        service_name=args.service_name,
    )
    with load.local_scores(args.path, jobs=args.jobs) as (scores, base):
        sent = export_otlp(scores, base, target)
    where = args.endpoint or str(args.out)
    print(f"{sent.spans} span(s) in {sent.traces} trace(s), {sent.metric_points} metric point(s) -> {where}")
    return 0
