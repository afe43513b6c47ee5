"""What `bench rescore` produces and the reports read: the scores file's lines as typed structs
(docs/scores-format.md, whose field tables a test checks against these).

The pipeline builds them, `bench.scorer.scores_io` writes and reads them (JSON Lines, decoded straight into these
structs), and the reports read their fields. Defaults are what a reader assumes for a field a line lacks.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import msgspec

from bench.core.cassette.records import RunMeta, ServerInfo, Settings

FORMAT_NAME = "bench-scores"
FORMAT_VERSION = 1


class ExchangeScore(msgspec.Struct, gc=False):
    """One exchange of a result (every attempt of every turn), timed as vLLM's serving benchmark does."""

    id: str = ""
    turn: int = 0
    attempt: int = 1
    outcome: str = "complete"
    status: int | None = None
    final: bool = True
    ttft_us: int | None = None
    e2el_us: int | None = None
    tpot_us: float | None = None
    # Held in memory as an int32/int64 array (4 B a gap instead of 36): every result waits for the sorted write.
    itl_us: Sequence[int] | None = None
    output_tokens: int | None = None
    tokens_source: str | None = None
    n_events: int = 0
    loop_lag_us: int | None = None  # the recording proxy's longest event-loop stall during the exchange
    started_us: int | None = None  # wall clock at the request, microseconds since the epoch
    end_us: int | None = None  # the whole response read, microseconds after started_us
    # The cassette holding the exchange when it is not the result's (another shard of a run recorded by several
    # workers); absent otherwise.
    cassette: str | msgspec.UnsetType = msgspec.UNSET


class CheckScore(msgspec.Struct, gc=False):
    """One check of the test applied to the result."""

    evaluator: str = ""
    version: int = 0
    # The check's arguments as the catalog gives them: their shape is each evaluator's own.
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    weight: float = 1.0
    status: str = "skipped"
    score: float | None = None
    passed: bool | None = None
    detail: str = ""


class CallsVsReference(msgspec.Struct, gc=False):
    """The model's tool calls (final attempts) against the reference solution's: how many, and which names."""

    made: int = 0
    reference: int = 0
    verdict: str = "same"  # same | more | fewer | different (as many calls, other tools)
    missing: list[str] = msgspec.field(default_factory=list)  # reference calls not made, by tool name
    extra: list[str] = msgspec.field(default_factory=list)  # calls the reference does not make, by tool name


class Result(msgspec.Struct, tag_field="kind", tag="result", gc=False):
    """One (run, model, test, epoch)."""

    run: str | None = None
    cassette: str = ""
    test: str = ""
    suite: str | None = None
    category: str | None = None
    subcategory: str | None = None
    model: str | None = None
    endpoint: str | None = None
    served_model: str | None = None
    system_fingerprint: str | None = None
    epoch: int = 0
    status: str = "scored"
    score: float | None = None
    passed: bool | None = None
    failure_type: str | None = None
    checks: list[CheckScore] = msgspec.field(default_factory=list)
    findings: list[str] = msgspec.field(default_factory=list)
    test_hash: str | None = None
    catalog_test_hash: str | None = None
    # The sampling settings of the first request (temperature, seed, max_tokens, stream) as the client sent them.
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    attempts: int = 0
    retries: int = 0
    exchanges: list[ExchangeScore] = msgspec.field(default_factory=list)
    # Tool-using tests only (tools offered or a workspace): the calls against the reference solution's.
    calls: CallsVsReference | None = None
    level: int | None = None  # the `bench load` level the conversation was sent at (its first exchange's tag)


class LoadTag(msgspec.Struct, gc=False):
    """Where an exchange of a `bench load` run stands in it: its level and phase, and for a scheduled arrival when it
    was due and how late the generator sent it (its `X-Bench-*` tags, docs/load.md)."""

    level: int = 0
    load: str = ""  # the level's load: "rate=4.5", "concurrency=8", "synchronous=1", "throughput=64", "replay=2"
    phase: str = "measure"  # warmup | measure | cooldown: only `measure` counts in a level's figures
    at_us: int | None = None  # the arrival's scheduled offset from the level's start
    late_us: int | None = None  # how much later than that the generator sent it


class SessionKeys(msgspec.Struct, gc=False):
    """What an exchange says about the conversation it belongs to (bench.scorer.sessions): read from its request, its
    headers and its answer when the traffic line is made; the session itself is linked from them afterwards."""

    previous_response_id: str | None = None
    # Tool-call ids whose results the request carries, and the ones the answer made.
    calls_in: list[str] = msgspec.field(default_factory=list)
    calls_out: list[str] = msgspec.field(default_factory=list)
    # The client's own session id: a session header, a `traceparent`'s trace id (`trace:…`), or Responses' conversation.
    client_session: str | None = None


class TrafficLine(msgspec.Struct, tag_field="kind", tag="traffic", gc=False):
    """One recorded exchange, tagged or not, as the traffic report counts it (bench.scorer.traffic_lines)."""

    cassette: str = ""
    id: str = ""
    started: int | None = None
    endpoint: str = ""
    method: str = ""
    model: str | None = None
    served_model: str | None = None
    client: str | None = None
    test: str | None = None
    status: int | None = None
    outcome: str = ""
    streamed: bool = False
    failed: bool = False
    findings: list[str] = msgspec.field(default_factory=list)
    input_tokens: int | None = None
    # Files from before this field was written: their input tokens came from usage.
    input_tokens_source: str | None = "usage"
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    tokens_source: str | None = None
    ttft_us: int | None = None
    tpot_us: float | None = None
    e2el_us: int | None = None
    # Held in memory as an int32/int64 array, as ExchangeScore's.
    itl_us: Sequence[int] | None = None
    n_events: int = 0
    system_fingerprint: str | None = None
    unknown_events: dict[str, int] = msgspec.field(default_factory=dict)
    # The exchange's end (the cassette's timing.end), from its start: with `started`, when it was in flight.
    end_us: int | None = None
    load: LoadTag | None = None  # an exchange `bench load` sent
    last_read_us: int | None = None  # when the answer's last read arrived, from `started`
    upstream: str | None = None  # the upstream's base URL (no credentials)
    # The sampling settings the request asked for (temperature, seed, max_tokens, stream), as a result's.
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    response_id: str | None = None
    finish_reason: str | None = None
    request_fp: str | None = None  # the request's fingerprint (the cassette's request.fp), as replay matches it
    # The agent session the exchange belongs to, and what linked it to the session's earlier exchanges (None: the
    # session's first); bench.scorer.sessions.
    session: str | None = None
    session_link: str | None = None
    session_keys: SessionKeys = msgspec.field(default_factory=SessionKeys)

    def key(self) -> tuple[str, int, str]:
        """The scores file's order of traffic lines."""
        return (self.cassette, self.started or 0, self.id)


class Verdict(msgspec.Struct, gc=False):
    """What scoring a conversation decides (the rest of a result is its identity and its exchanges)."""

    status: str
    score: float | None = None
    passed: bool | None = None
    failure_type: str | None = None
    checks: list[CheckScore] = msgspec.field(default_factory=list)
    calls: CallsVsReference | None = None


class Budgets(msgspec.Struct, gc=False):
    max_tokens: int | None = None
    deadline_s: float | None = None


class CassetteInfo(msgspec.Struct, gc=False):
    """A cassette that was read: where, which run, and its header's settings and run metadata."""

    path: str = ""
    run: str | None = None
    created: str | None = None
    truncated: bool = False
    # Closed cleanly, but its run was stopped before it finished (the end record's `interrupted`): tests may be missing.
    interrupted: bool = False
    # Exchanges a replaying proxy served from a recording: their timing is the recording's, replayed, not measured.
    replayed: int = 0
    settings: Settings = msgspec.field(default_factory=Settings)
    run_meta: RunMeta = msgspec.field(default_factory=RunMeta)
    # What served the run, from the header (docs/cassette-format.md): None for cassettes without it.
    server: ServerInfo | None = None


class Meta(msgspec.Struct, tag_field="kind", tag="meta", gc=False):
    """Line 1 of a scores file."""

    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION
    bench_version: str | None = None
    scorer_version: str | None = None
    parser_version: int | None = None
    scoring_version: int | None = None
    catalog_hash: str | None = None
    evaluators: dict[str, int] = msgspec.field(default_factory=dict)
    budgets: Budgets = msgspec.field(default_factory=Budgets)
    cassettes: list[CassetteInfo] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)


def _plain(value: Any) -> Any:
    if isinstance(value, array):
        return value.tolist()
    raise NotImplementedError(f"cannot write {type(value).__name__} to a scores file")


# Sorted keys: the file is deterministic and diffs line up (docs/scores-format.md).
ENCODER = msgspec.json.Encoder(enc_hook=_plain, order="sorted")
META_DECODER = msgspec.json.Decoder(Meta)
RESULT_DECODER = msgspec.json.Decoder(Result)


class _ScoresOnly(Result, tag="result", gc=False):
    """A result read back without its exchanges: they are skipped undecoded (their ITLs are most of a line, and
    decoding them was ~2/3 of reading a result back). For lines bench encoded itself in this process only: what is
    skipped is not checked."""

    exchanges: msgspec.Raw = msgspec.Raw(b"[]")  # type: ignore[assignment]  # skipped, then replaced by []


_SCORES_ONLY = msgspec.json.Decoder(_ScoresOnly)


def scores_only(line: bytes) -> Result:
    """A result line this process encoded, read back with `exchanges` empty (the rescore's summary, flips and
    keep-latest read scores only)."""
    result: Result = _SCORES_ONLY.decode(line)
    result.exchanges = []
    return result


TRAFFIC_DECODER = msgspec.json.Decoder(TrafficLine)
