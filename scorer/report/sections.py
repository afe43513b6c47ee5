"""The report as titled tables of text, shared by the terminal, Markdown and HTML renderers so they say the same."""

from __future__ import annotations

from bench.scorer.report.aggregate import Report
from bench.scorer.report.cells import Section, interval, ms, pct, rate, seconds, triple
from bench.scorer.report.cost_sections import cost_sections
from bench.scorer.report.latency import LOOP_LAG_WARN_MS
from bench.scorer.report.levels_sections import level_sections
from bench.scorer.report.traffic_sections import traffic_sections

# Flaky lists can run to thousands on a big catalog; the JSON output keeps them all.
MAX_FLAKY_ROWS = 30


def summary(report: Report) -> Section:
    run = report.run
    cassettes = ", ".join(f"{c.path}{' (cut short)' if c.truncated else ''}" for c in run.cassettes)
    rows = [
        ["source", report.source],
        ["bench version", str(run.bench_version)],
        ["scorer version", f"{run.scorer_version} (parser {run.parser_version})"],
        ["catalog hash", str(run.catalog_hash)],
        ["catalog hash at recording", ", ".join(run.recorded_catalog_hashes) or "–"],
        ["evaluators", ", ".join(f"{k} v{v}" for k, v in sorted(run.evaluators.items())) or "–"],
        ["budgets", ", ".join(f"{k}={v}" for k, v in sorted(run.budgets.items())) or "–"],
        ["cassettes", cassettes or "–"],
    ]
    return Section("Run", ["setting", "value"], rows)


def rate_section(report: Report, scope: str, title: str) -> Section:
    rows = []
    for r in report.rates:
        if r.scope != scope:
            continue
        c = r.counts
        lead = [r.model] if scope == "overall" else [r.model, r.group]
        rows.append(
            [
                *lead,
                pct(r.pass_rate),
                interval(r.low, r.high),
                f"{c.passed}/{c.scored}",
                str(c.errored),
                str(c.skipped),
                str(c.stale),
            ]
        )
    lead_cols = ["model"] if scope == "overall" else ["model", scope]
    first = len(lead_cols)
    return Section(
        title,
        [*lead_cols, "pass rate", "95% CI", "passed/scored", "errored", "skipped", "stale"],
        rows,
        notes=["Pass rate = passed / scored; errored, skipped and stale results are not in it. CI: Wilson score."],
        numeric=set(range(first, first + 6)),
    )


def epoch_section(report: Report) -> Section:
    rows = [[e.model, str(e.k), str(e.tests), pct(e.pass_at_k), pct(e.pass_hat_k)] for e in report.epochs]
    return Section(
        "Epochs",
        ["model", "k", "tests", "pass@k", "pass^k"],
        rows,
        notes=["pass@k: chance at least one of k epochs passes; pass^k: chance all k pass (unbiased estimators)."],
        numeric={1, 2, 3, 4},
    )


def flaky_section(report: Report) -> Section:
    rows = [[f.model, f.test, str(f.run or "–"), f"{f.passed}/{f.scored}"] for f in report.flaky[:MAX_FLAKY_ROWS]]
    notes = ["Tests whose epochs disagree (some passed, some failed)."]
    if len(report.flaky) > MAX_FLAKY_ROWS:
        notes.append(f"{len(report.flaky) - MAX_FLAKY_ROWS} more not shown (see --format json).")
    return Section("Flaky tests", ["model", "test", "run", "passed epochs"], rows, notes, numeric={3})


def timing_section(report: Report) -> Section:
    rows = []
    marked = False
    for model in report.models:
        t = report.timing[model]
        mark = ""
        if t.tokens_counted:
            mark, marked = "*", True
        rows.append(
            [
                model + (" (replayed)" if model in report.replayed_timing else ""),
                str(t.streamed),
                triple(t.ttft_ms),
                triple(t.tpot_ms) + mark,
                triple(t.itl_ms),
                triple(t.e2el_ms),
                rate(t.decode_tokens_per_s_median) + mark,
                rate(t.tokens_per_s_median) + mark,
            ]
        )
    notes = [
        "Milliseconds, p50 / p90 / p99. TTFT: first event with choices; ITL: every gap between such events, pooled; "
        "TPOT: (E2EL - TTFT) / (output tokens - 1); E2EL: request to last token event. "
        "decode tok/s: median per exchange of (output tokens - 1) / (E2EL - TTFT), the speed the server streams at "
        "(1 / TPOT); E2E tok/s: median per exchange of output tokens / E2EL, the wait for the first token included."
    ]
    if marked:
        notes.append("* some token counts were counted from the stream (no usage in the response), not reported.")
    if report.replayed_timing:
        notes.append(
            "(replayed): some of the model's exchanges were served by a replaying proxy: their timing is the "
            "recording's, replayed, not measured."
        )
    notes.extend(loop_lag_warnings(report))
    return Section(
        "Timing",
        ["model", "streamed", "TTFT ms", "TPOT ms", "ITL ms", "E2EL ms", "decode tok/s", "E2E tok/s"],
        rows,
        notes,
        numeric={1, 2, 3, 4, 5, 6, 7},
    )


def task_section(report: Report) -> Section:
    rows = [
        [
            t.model,
            str(t.results),
            seconds(t.median_s),
            seconds(t.p90_s),
            seconds(t.max_s),
            str(t.multi_turn),
            seconds(t.multi_turn_median_s),
            seconds(t.multi_turn_p90_s),
        ]
        for t in report.tasks
    ]
    return Section(
        "Seconds per task",
        ["model", "results", "p50 s", "p90 s", "max s", "multi-turn", "multi-turn p50 s", "multi-turn p90 s"],
        rows,
        notes=[
            "Wall time of each result: its first request sent to its last response read, every turn, retry and tool "
            "run between them included. Multi-turn: results of more than one turn."
        ],
        numeric=set(range(1, 8)),
    )


def calls_section(report: Report) -> Section:
    rows = [
        [
            c.model,
            str(c.results),
            str(c.same),
            str(c.more),
            str(c.fewer),
            str(c.different),
            f"{c.made / c.results:.2f}",
            f"{c.reference / c.results:.2f}",
        ]
        for c in report.calls
    ]
    return Section(
        "Tool calls against the reference",
        ["model", "results", "same", "more", "fewer", "different", "calls/result", "reference calls/result"],
        rows,
        notes=[
            "Tool-using tests, final attempts: more or fewer calls than the test's reference solution, or as many "
            "to other tools (different). `bench view` lists each result's missing and extra calls."
        ],
        numeric=set(range(1, 8)),
    )


def loop_lag_warnings(report: Report) -> list[str]:
    """A warning per model whose recording proxy stalled long enough to inflate the recorded ITLs."""
    out = []
    for model in report.models:
        lag = report.timing[model].loop_lag_ms
        if lag.p99 is not None and lag.p99 > LOOP_LAG_WARN_MS:
            out.append(
                f"Warning: {model}: recorded ITLs may be inflated by up to {ms(lag.p99)} ms. The recording proxy's "
                f"event loop stalled that long (p99 over {lag.count} exchanges of the longest stall each saw; "
                f"p50 {ms(lag.p50)} ms), and a read that arrived during a stall was stamped late by up to the stall. "
                f"Above {LOOP_LAG_WARN_MS:g} ms this exceeds the recorded ITL's accuracy goal (0.5 ms at p99); "
                "record with less load on the proxy's machine or fewer concurrent streams."
            )
    return out


def failure_section(report: Report) -> Section:
    rows = [[m, kind, str(n)] for m in report.models for kind, n in report.failures[m].items()]
    return Section("Failure types", ["model", "failure type", "results"], rows, numeric={2})


def reliability_section(report: Report) -> Section:
    rows = [
        [
            r.model,
            *(
                str(v)
                for v in (
                    r.results,
                    r.attempts,
                    r.retries,
                    r.results_retried,
                    r.errored,
                    r.failed_exchanges,
                    r.max_tokens,
                    r.no_finish_reason,
                )
            ),
        ]
        for r in report.reliability
    ]
    columns = ["results", "attempts", "retries", "results retried", "errored", "failed exchanges"]
    return Section(
        "Retries and errors",
        ["model", *columns, "max_tokens", "no finish_reason"],
        rows,
        notes=[
            "Failed exchange: any attempt that did not complete with a 2xx status (retried ones included). "
            "max_tokens: results whose answer stopped at the token limit (finish_reason length). "
            "no finish_reason: results whose answer stream the server closed without one (cut)."
        ],
        numeric=set(range(1, 9)),
    )


def settings_section(report: Report) -> Section:
    rows = []
    for s in report.settings:
        shown = {k: ", ".join(v) for k, v in s.settings.items()}
        if s.seed_mode in ("fixed", "per-epoch") and "seed" in shown:
            shown["seed"] = f"{s.seed_base} (fixed)" if s.seed_mode == "fixed" else f"{s.seed_base} + epoch (per-epoch)"
        settings = "; ".join(f"{k}={v}" for k, v in shown.items()) or "–"
        rows.append([s.model, ", ".join(s.served_models) or "–", ", ".join(s.system_fingerprints) or "–", settings])
    return Section("Models and settings", ["requested model", "served model", "system fingerprint", "settings"], rows)


def server_section(report: Report) -> Section:
    def cell(value: object) -> str:
        return "–" if value is None else str(value)

    rows = [
        [
            s.model,
            f"{cell(s.engine)} {s.version or ''}".strip(),
            cell(s.context_length),
            cell(s.trained_context),
            cell(s.quantization),
            cell(s.parameters),
            cell(s.kv_cache_type),
            cell(s.file),
            s.cassette,
        ]
        for s in report.run.servers
        if s.facts()  # a server that described nothing (a hosted API, the simulator) has no row to show
    ]
    return Section(
        "Server",
        ["model", "engine", "context", "trained context", "quantization", "parameters", "KV cache", "file", "cassette"],
        rows,
        notes=["As the serving engine described itself when the run was recorded (docs/record.md)."],
    )


def sections(report: Report) -> list[Section]:
    """Every table of the report, in reading order; empty ones are dropped."""
    all_sections = [
        summary(report),
        *level_sections(report.levels),
        rate_section(report, "overall", "Pass rate"),
        rate_section(report, "suite", "Pass rate by suite"),
        rate_section(report, "category", "Pass rate by category"),
        epoch_section(report),
        flaky_section(report),
        failure_section(report),
        timing_section(report),
        task_section(report),
        calls_section(report),
        reliability_section(report),
        settings_section(report),
        server_section(report),
    ]

    all_sections.extend(cost_sections(report.cost))
    all_sections.extend(traffic_sections(report.traffic))
    return [s for s in all_sections if s.rows]
