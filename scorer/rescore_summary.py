"""The terminal summary of a rescore: pass rates per model, failure types, warnings and flips (rich tables)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from bench.scorer.caveats import cassette_lines, model_lines, result_flags
from bench.scorer.failures import FAILURE_TYPES, SCORER_FAILURES, TRANSPORT
from bench.scorer.flips import Flip
from bench.scorer.results import Meta, Result

BUDGET_NOTE = (
    "what-if budgets are approximations: --max-tokens cuts the recorded stream after N token events (one event is "
    "about one token; a server that packs several tokens per event is cut late, and a non-streamed answer is cut "
    "in proportion to its text); --deadline cuts at the time the proxy received each read, not when a client "
    "would have, and a model given a smaller budget might have answered differently rather than just stopping."
)


def _fmt_score(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


@dataclass
class Tally:
    """What the summary shows of the results, counted as they stream past (one pass, nothing held per result)."""

    results: int = 0
    per_model: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    failures: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    caveats: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, r: Result) -> None:
        self.results += 1
        model = r.model or "?"
        caveats = self.caveats[model]
        caveats["results"] += 1
        caveats.update(result_flags(r))
        c = self.per_model[model]
        c[r.status] += 1
        if r.status == "scored" and r.passed:
            c["passed"] += 1
        if r.failure_type:
            self.failures[model][r.failure_type] += 1

    @classmethod
    def of(cls, results: Iterable[Result]) -> Tally:
        tally = cls()
        for r in results:
            tally.add(r)
        return tally


def print_summary(
    console: Console,
    meta: Meta,
    results: Sequence[Result] | Tally,
    flips: Sequence[Flip] | None,
    out: str,
    traffic: int = 0,
) -> None:
    tally = results if isinstance(results, Tally) else Tally.of(results)
    # What the numbers below cannot show, as every report says it (bench.scorer.caveats).
    for warning in [*meta.warnings, *cassette_lines(meta), *model_lines(tally.caveats)]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    if meta.budgets.max_tokens is not None or meta.budgets.deadline_s is not None:
        console.print(f"[cyan]note:[/] {BUDGET_NOTE}", highlight=False, soft_wrap=True)
    per_model, failures = tally.per_model, tally.failures
    table = Table(title=f"bench rescore · scorer {meta.scorer_version} · {tally.results} results")
    for col in ("model", "scored", "passed", "pass rate", "errored", "skipped", "stale", "unknown"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for model in sorted(per_model):
        c = per_model[model]
        rate = f"{c['passed'] / c['scored']:.1%}" if c["scored"] else "-"
        table.add_row(
            model,
            str(c["scored"]),
            str(c["passed"]),
            rate,
            *(str(c[k]) for k in ("errored", "skipped", "stale", "unknown")),
        )
    console.print(table)
    if any(failures.values()):
        ft = Table(title="failure types (* errored: not scored, excluded from pass rates)")
        ft.add_column("model")
        kinds = [k for k in FAILURE_TYPES if any(failures[m][k] for m in failures)]
        for k in kinds:
            ft.add_column(k + (" *" if k in TRANSPORT or k in SCORER_FAILURES else ""), justify="right")
        for model in sorted(failures):
            ft.add_row(model, *(str(failures[model][k] or "") for k in kinds))
        console.print(ft)
    if flips is not None:
        if not flips:
            console.print("no flips since the earlier scores file")
        else:
            fl = Table(title=f"{len(flips)} flip(s) since the earlier scores file")
            for col in ("test", "model", "epoch", "old", "new", "cause"):
                fl.add_column(col)
            for f in flips:
                old = f"{f.old_status} {_fmt_score(f.old_score)}"
                new = f"{f.new_status} {_fmt_score(f.new_score)}"
                fl.add_row(f.test, f.model, str(f.epoch), old, new, f.cause)
            console.print(fl)
    if traffic:
        console.print(
            f"{traffic} exchange(s) parsed as traffic (every endpoint, tagged or not): `bench report` shows them",
            highlight=False,
        )
    console.print(f"scores written to {out}", highlight=False)
