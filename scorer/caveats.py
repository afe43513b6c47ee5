"""What a reader of the numbers must be told about where they came from, said in the same words by every place that
shows them (`bench report` in every format, `bench compare`, `bench health`, `bench view`):

- a run stopped before it finished (the end record's `interrupted`), or a cassette cut short (no end record, damage):
  tests may be missing;
- timing replayed, not measured: exchanges a replaying proxy served from a recording carry the recording's TTFT/ITL;
- answers the server ended without a finish_reason (the parser's `no_finish_reason`): cut, though recorded complete;
- answers that stopped at the token limit (`max_tokens`, or a what-if budget's `budget_max_tokens`): counted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from bench.scorer.results import Meta, Result

MAX_TOKENS = "max_tokens"
NO_FINISH = "no_finish_reason"
REPLAYED = "replayed timing"
INTERRUPTED = "interrupted run"  # bench view's flag for a result whose cassette's run did not finish
_STOPPED_AT_LIMIT = frozenset({"max_tokens", "budget_max_tokens"})


def result_flags(result: Result, replayed: frozenset[str] = frozenset()) -> list[str]:
    """The caveats that apply to one result: MAX_TOKENS, NO_FINISH, REPLAYED (its cassette is in `replayed`)."""
    found = result.findings or ()
    flags = [MAX_TOKENS] if _STOPPED_AT_LIMIT.intersection(found) else []
    if NO_FINISH in found:
        flags.append(NO_FINISH)
    if result.cassette in replayed:
        flags.append(REPLAYED)
    return flags


def replayed_cassettes(meta: Meta) -> frozenset[str]:
    """The cassettes (as results name them) holding exchanges a replaying proxy served."""
    return frozenset(c.path for c in meta.cassettes if c.replayed)


def interrupted_cassettes(meta: Meta) -> frozenset[str]:
    """The cassettes (as results name them) whose run was interrupted or that were cut short: tests may be missing."""
    return frozenset(c.path for c in meta.cassettes if c.interrupted or c.truncated)


def cassette_lines(meta: Meta) -> list[str]:
    """One line per cassette whose run did not finish or whose timing was replayed."""
    out: list[str] = []
    for c in meta.cassettes:
        if c.truncated:
            out.append(f"cassette {c.path} was cut short (a killed or interrupted run): some tests may be missing")
        elif c.interrupted:
            run = f" (resume it: bench record --resume {c.run})" if c.run else ""
            out.append(f"cassette {c.path}: its run was interrupted before it finished: some tests may be missing{run}")
        if c.replayed:
            out.append(
                f"cassette {c.path}: {c.replayed} exchange(s) were served by a replaying proxy: their TTFT/ITL/E2EL "
                "are the recording's timing replayed, not measured"
            )
    return out


class CaveatTally:
    """Per model, the results each caveat applies to, counted as results go by."""

    def __init__(self, meta: Meta) -> None:
        self.meta = meta
        self.replayed = replayed_cassettes(meta)
        self.per_model: dict[str, Counter[str]] = defaultdict(Counter)

    def add(self, result: Result) -> None:
        counts = self.per_model[str(result.model)]
        counts["results"] += 1
        counts.update(result_flags(result, self.replayed))

    def lines(self) -> list[str]:
        return cassette_lines(self.meta) + model_lines(self.per_model)


def model_lines(per_model: Mapping[str, Counter[str]]) -> list[str]:
    """The caveats counted per model (`results` and the flags of `result_flags`), one line each."""
    out = []
    for model, counts in sorted(per_model.items()):
        if counts[NO_FINISH]:
            out.append(
                f"{model}: {counts[NO_FINISH]} of {counts['results']} result(s) end in a stream the server closed "
                "without a finish_reason (recorded complete, but cut: finding no_finish_reason)"
            )
    return out
