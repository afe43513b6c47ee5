"""`bench record`: send the catalog through the recording proxy into a cassette (docs/record.md)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.errors import BenchError
from bench.core.spool import fetch_all, spool_folder, upload_leftovers
from bench.core.storage import is_url, upload

if TYPE_CHECKING:
    from bench.catalog.driver.config import RecordConfig
    from bench.catalog.driver.record_run import RecordSummary


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "record",
        help="record the test catalog for models through the proxy into a cassette",
        description="Send catalog tests for each model and epoch through the recording proxy (docs/record.md).",
    )
    p.add_argument("--config", type=Path, help="bench.yaml with any of the keys in docs/record.md (flags win)")
    p.add_argument("--upstream", help="OpenAI-compatible gateway base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", dest="models", action="append", help="model to record (repeatable)")
    p.add_argument("--suite", dest="suites", action="append", help="only this suite (repeatable)")
    p.add_argument(
        "--category",
        dest="categories",
        action="append",
        help="only tests of this category (repeatable; `bench catalog ls` shows each test's), with --suite: both",
    )
    p.add_argument("--tests", help="only these test ids, comma-separated")
    p.add_argument("--epochs", type=int, help="repeats of each test per model (default 1)")
    p.add_argument("--concurrency", type=int, help="requests in flight at once (default 8)")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="seed mode 'fixed': every request of every epoch sends seed N (is the backend deterministic?)",
    )
    seeds.add_argument(
        "--seed-per-epoch",
        type=int,
        metavar="N",
        help="seed mode 'per-epoch': epoch e sends seed N + e (independent repeats)",
    )
    p.add_argument(
        "--out",
        help="folder for cassettes (default ./cassettes), or an object-storage prefix (s3://bucket/runs): written in "
        "--spool first, uploaded and verified when closed (docs/scale.md)",
    )
    p.add_argument(
        "--spool",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --out URL: where bench's spool folder for that URL is made (default: bench's cache, "
        "~/.cache/bench/spool); only what bench wrote there is uploaded",
    )
    p.add_argument("--proxy", help="send through this running bench proxy instead of starting one")
    p.add_argument("--catalog", type=Path, help="catalog folder (default: the built-in catalog)")
    p.add_argument("--resume", metavar="RUN", help="record only what run RUN (in --out) is missing")
    p.add_argument(
        "--api",
        choices=("chat", "responses"),
        help="send the catalog to /v1/chat/completions (default) or to the Responses API, /v1/responses",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(handler=run_record)


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise BenchError(f"--{name} must be at least 1 (got {value})")


def _seed_flags(fixed: int | None, per_epoch: int | None) -> dict[str, Any]:
    if fixed is not None:
        return {"seed": fixed, "seed_mode": "fixed"}
    if per_epoch is not None:
        return {"seed": per_epoch, "seed_mode": "per-epoch"}
    return {}


def run_record(args: argparse.Namespace) -> int:
    from bench.catalog.driver.progress import make_reporter
    from bench.catalog.driver.record_run import record
    from bench.scorer.checked_catalog import load_catalog

    _positive("epochs", args.epochs)
    _positive("concurrency", args.concurrency)
    _once_each(args)
    remote = _spooled(args)
    cfg = _config(args)
    catalog = load_catalog(args.catalog or (Path(cfg.catalog) if cfg.catalog else None))
    reporter = make_reporter(args.quiet, cfg.progress_every)
    summary = asyncio.run(record(cfg, catalog, resume=args.resume, reporter=reporter, handle_signals=True))
    return _said(summary, cfg, remote)


def _once_each(args: argparse.Namespace) -> None:
    """A model given twice is recorded once, with a warning (results would otherwise read as false retries)."""
    from bench.catalog.driver.config import repeated

    twice = repeated(args.models) if args.models else []
    if twice:
        print(
            f"bench record: warning: --model {', '.join(twice)} given more than once: recorded once "
            "(--epochs N repeats each test)",
            file=sys.stderr,
        )
        args.models = list(dict.fromkeys(args.models))


def _spooled(args: argparse.Namespace) -> str | None:
    """For `--out URL`: record into bench's own spool folder for that URL (never the user's ./cassettes), uploading
    what a killed run left there first; returns the URL, or None for a local --out."""
    if args.out is None or not is_url(args.out):
        return None
    # Recorded locally first (every crash-safety guarantee of a local cassette), uploaded once closed.
    args.spool = spool_folder(args.out, args.spool)
    remote, args.out = str(args.out), str(args.spool)
    # A cassette a killed `bench record` closed but did not upload goes first (verified), before any fetch.
    for line in upload_leftovers(args.spool, remote):
        print(line, flush=True)
    if args.resume:
        fetch_all(remote, args.spool)  # the run's earlier cassettes, to see what it is missing
    return remote


def _config(args: argparse.Namespace) -> RecordConfig:
    """The run's settings: flags over bench.yaml over a resumed run's own (its header), checked."""
    from bench.catalog.driver.config import RecordConfig, build_config, check_ready, load_config_file
    from bench.catalog.driver.resume import read_run

    flags: dict[str, Any] = {
        "upstream": args.upstream,
        "models": args.models,
        "suites": args.suites,
        "categories": args.categories,
        "tests": [t.strip() for t in args.tests.split(",") if t.strip()] if args.tests else None,
        "epochs": args.epochs,
        "concurrency": args.concurrency,
        "out": args.out,
        "proxy": args.proxy,
        "api": args.api,
        **_seed_flags(args.seed, args.seed_per_epoch),
    }
    values: dict[str, Any] = {}
    if args.resume:
        out = Path(args.out or RecordConfig().out)
        meta, _files, _jobs = read_run(out, args.resume)
        values.update({k: v for k, v in (meta.config or {}).items() if k != "api_key_set"})
    if args.config is not None:
        values.update(load_config_file(args.config))
    cfg = build_config(values, flags)
    check_ready(cfg)
    return cfg


def _said(summary: RecordSummary, cfg: RecordConfig, remote: str | None) -> int:
    """What the run did, the cassette (uploaded for --out URL), and what to run next; the exit code."""
    from bench.catalog.driver.config import RecordConfig

    out_arg = f" --out {cfg.out}" if cfg.out != RecordConfig().out else ""
    if summary.skipped_complete:
        print(f"run {summary.run_id}: {summary.skipped_complete} job(s) already recorded, skipped")
    if summary.jobs == 0:
        print(f"run {summary.run_id}: nothing left to record")
        return 0
    print(
        f"run {summary.run_id}: {summary.done}/{summary.jobs} jobs, {summary.requests} requests "
        f"({summary.retries} retries, {summary.errors} failed jobs) in {summary.elapsed:.1f} s"
    )
    for line in summary.failures[:5]:
        print(f"  failed: {line}")
    if summary.cassette is not None:
        print(f"cassette: {summary.cassette}")
        if remote is not None and Path(summary.cassette).exists():
            # The local copy is removed only once the object is verified; a failed upload keeps it (one line).
            url = upload(Path(summary.cassette), remote)
            print(f"uploaded {url} (size and sha256 verified), removed the local copy")
            out_arg = f" --out {remote}"
    if summary.interrupted:
        print(f"interrupted: resume with `bench record --resume {summary.run_id}{out_arg}`", file=sys.stderr)
        return 130
    if remote is not None:
        print(f"next: bench rescore {remote} --out scores.jsonl && bench report scores.jsonl")
        return 0
    print(f"next: bench rescore {cfg.out} && bench report {cfg.out}")
    return 0
