"""`bench report`, `bench compare` and `bench health`: read scores (or rescore cassettes in memory) and explain them.

Everything heavy (numpy, scipy, rich, the scorer pipeline) is imported inside the handlers so `bench --help` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.errors import BenchError
from bench.core.storage import location
from bench.scorer.report import formats

if TYPE_CHECKING:
    from bench.scorer.report.cost import CostTally
    from bench.scorer.report.levels_compare import SamplesTally
    from bench.scorer.report.load import Stream
    from bench.scorer.results import TrafficLine


def register(subparsers: Any) -> None:
    report = subparsers.add_parser(
        "report",
        help="pass rates, epochs, failures, timing and settings of a run",
        description="Report on a scores file, or on a folder of cassettes (its scores.jsonl, else rescored in memory).",
    )
    report.add_argument(
        "path", type=location, metavar="PATH", help="scores file, or folder of cassettes (or their s3://... URL)"
    )
    report.add_argument(
        "--format", choices=formats.names(report=True), help="output format (default: from --out's suffix, else table)"
    )
    report.add_argument("--out", type=Path, metavar="FILE", help="write to FILE instead of standard output")
    report.add_argument(
        "--view-url",
        metavar="URL",
        help="the address of a bench view of this run (what it printed): the HTML report links each failed test there",
    )
    _prices(report)
    _slo(report)
    _jobs(report)
    report.set_defaults(handler=_with_progress("bench report", run_report))

    compare = subparsers.add_parser(
        "compare",
        help="paired comparison of two runs: regressions, improvements, significance",
        description="Pair results by test, model and epoch; test each model and category with exact McNemar.",
    )
    compare.add_argument("a", type=location, metavar="A", help="the baseline: scores file or folder of cassettes")
    compare.add_argument("b", type=location, metavar="B", help="the candidate: scores file or folder of cassettes")
    compare.add_argument(
        "--format", choices=formats.names(report=False), help="output format (default: from --out's suffix, else table)"
    )
    compare.add_argument("--out", type=Path, metavar="FILE", help="write to FILE instead of standard output")
    compare.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when B has a statistically significant regression"
    )
    _prices(compare)
    _slo(compare)
    _jobs(compare)
    compare.set_defaults(handler=_with_progress("bench compare", run_compare))

    health = subparsers.add_parser(
        "health",
        help="which tests separate models, which are saturated, which are unstable",
        description="Catalog health over one or more runs (scores files or folders of cassettes).",
    )
    health.add_argument("runs", type=location, nargs="+", metavar="RUN", help="scores file or folder of cassettes")
    health.add_argument(
        "--format", choices=formats.names(report=False), help="output format (default: from --out's suffix, else table)"
    )
    health.add_argument("--out", type=Path, metavar="FILE", help="write to FILE instead of standard output")
    _jobs(health)
    health.set_defaults(handler=_with_progress("bench health", run_health))


def _with_progress(label: str, handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """The command's handler, showing the progress of any cassettes it rescores in memory (bench.scorer.progress)."""

    def run(args: argparse.Namespace) -> int:
        from bench.scorer import progress

        with progress.shown(label):
            return handler(args)

    return run


def _prices(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prices", type=Path, metavar="FILE", help="price table (YAML, per million tokens) for cost; docs/report.md"
    )


def _slo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--slo",
        nargs="+",
        metavar="METRIC:MS",
        help="a load run's SLO for goodput, e.g. ttft:200 tpot:50 e2el:5000 (default: the one it was recorded with)",
    )


def _jobs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs", "-j", type=int, default=1, metavar="N", help="processes when rescoring cassettes in memory"
    )


def run_report(args: argparse.Namespace) -> int:
    from bench.scorer.report import aggregate, load
    from bench.scorer.report.slo import parse_slo

    fmt = formats.choose(args.format, args.out, report=True)
    view_url = getattr(args, "view_url", None)  # bench demo reports through here without the flag
    if view_url is not None:
        from bench.scorer.report.failed_tests import view_base

        view_url = view_base(view_url)  # refused before any work
    prices = _load_prices(getattr(args, "prices", None))
    given = getattr(args, "slo", None)  # bench demo reports through here without the flag
    slo = parse_slo(given) if given else None
    # One pass over the scores file as it is read: memory bounded by the report's groups, not the run's exchanges.
    with load.stream(args.path, jobs=_check_jobs(args.jobs)) as scores:
        report = aggregate.build(scores, prices, slo)
    report.view_url = view_url
    _render(fmt, args.out, formats.report_document(report))
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from bench.scorer.report import compare, compare_sections, load
    from bench.scorer.report.aggregate import recorded_slo
    from bench.scorer.report.levels_compare import SamplesTally, compare_levels
    from bench.scorer.report.slo import parse_slo

    fmt = formats.choose(args.format, args.out, report=False)  # refused before any work
    jobs = _check_jobs(args.jobs)
    prices = _load_prices(getattr(args, "prices", None))
    slo = parse_slo(args.slo) if args.slo else None
    # Each run read in one pass, keeping a small record per result (no checks, no timing); cost, when asked, is
    # counted from the traffic lines in the same pass, and a load run's levels kept as a few values per request.
    sides, costs, samples = [], [], []
    for path in (args.a, args.b):
        with load.stream(path, jobs=jobs) as scores:
            if slo is None:
                slo = recorded_slo(scores.meta)  # A's, applied to both sides alike
            levels = SamplesTally(slo)
            if prices is None:
                sides.append(compare.side(_sampled(scores, levels)))
            else:
                from bench.scorer.report.cost import CostTally

                tally = CostTally(prices)
                sides.append(compare.side(_costed(_sampled(scores, levels), tally)))
                costs.append(tally.finish())
            samples.append(levels.levels)
    result = compare.compare(*sides)
    body = {**dataclasses.asdict(result), "significant_regression": result.significant_regression}
    sections = compare_sections.sections(result)
    if samples[0] and samples[1]:
        from bench.scorer.report.levels_sections import compare_section

        deltas, level_warnings = compare_levels(samples[0], samples[1])
        body["levels"] = {"slo": slo, "deltas": [dataclasses.asdict(d) for d in deltas]}
        sections.insert(0, compare_section(deltas))
        result.warnings.extend(level_warnings)
    if prices is not None:
        from bench.scorer.report.cost import cost_delta
        from bench.scorer.report.cost_sections import cost_delta_section

        delta = cost_delta(*costs)
        body["cost"] = {"currency": prices.currency, "models": [dataclasses.asdict(d) for d in delta]}
        sections.append(cost_delta_section(delta, prices.currency))
    _render(fmt, args.out, formats.Document(sections=sections, body=body, warnings=result.warnings))
    if args.fail_on_regression:
        verdict = "significant regression: exit 1" if result.significant_regression else "no significant regression"
        print(f"bench compare: {verdict} ({compare.RULE})", file=sys.stderr)
        return 1 if result.significant_regression else 0
    return 0


def run_health(args: argparse.Namespace) -> int:
    from bench.scorer.report import health, health_sections, load

    fmt = formats.choose(args.format, args.out, report=False)  # refused before any work
    jobs = _check_jobs(args.jobs)
    tally, sources = health.HealthTally(), []
    for i, path in enumerate(args.runs):  # one run at a time, a result at a time
        with load.stream(path, jobs=jobs) as scores:
            tally.run(i, scores)
            sources.append(scores.source)
    result = tally.finish(sources)
    body = {
        **dataclasses.asdict(result),
        "saturated": [t.test for t in result.saturated],
        "unstable": [t.test for t in result.unstable],
    }
    doc = formats.Document(sections=health_sections.sections(result), body=body, warnings=result.warnings)
    _render(fmt, args.out, doc)
    return 0


def _sampled(scores: Stream, tally: SamplesTally) -> Stream:
    """The stream with its load levels' values kept by `tally` as they go by."""
    from bench.scorer.results import Result

    def lines() -> Iterator[Result | TrafficLine]:
        for line in scores.lines:
            if isinstance(line, Result):
                tally.result(line)
            else:
                tally.traffic_line(line)
            yield line

    return dataclasses.replace(scores, lines=lines())


def _costed(scores: Stream, tally: CostTally) -> Stream:
    """The stream with its traffic lines counted into `tally` as they go by."""
    from bench.scorer.results import Result

    def lines() -> Iterator[Result | TrafficLine]:
        for line in scores.lines:
            if not isinstance(line, Result):
                tally.add(line)
            yield line

    return dataclasses.replace(scores, lines=lines())


def _load_prices(path: Path | None) -> Any:
    if path is None:
        return None
    from bench.scorer.report.cost import load_prices

    return load_prices(path)


def _check_jobs(jobs: int) -> int:
    if jobs < 1:
        raise BenchError(f"--jobs {jobs}: give a number of processes of 1 or more")
    return jobs


def _render(fmt: str, out: Path | None, doc: formats.Document) -> None:
    if out is None and sys.stdout.isatty():
        # A terminal gets colours and its own width; a pipe or a file plain text wide enough for the timing and
        # comparison tables (80 columns would fold them).
        target = formats.Target(terminal=True, width=shutil.get_terminal_size().columns)
    else:
        target = formats.Target()
    _emit(out, formats.FORMATS[fmt].render(doc, target))


def _emit(out: Path | None, text: str) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"{out}: cannot write ({exc.strerror}); choose another --out") from exc
