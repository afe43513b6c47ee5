"""The traffic tables of `bench report` (every format), from bench.scorer.report.traffic."""

from __future__ import annotations

from bench.scorer.report.cells import Section, pct, triple
from bench.scorer.report.traffic import Traffic, TrafficRow


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {n}" for k, n in counts.items()) or "–"


TRAFFIC_COLUMNS = [
    "endpoint",
    "requested model",
    "served model",
    "client",
    "requests",
    "statuses",
    "outcomes",
    "error rate",
    "tokens in",
    "tokens out",
    "fingerprints",
]
TIMING_COLUMNS = [
    "endpoint",
    "requested model",
    "client",
    "streamed",
    "TTFT ms",
    "TPOT ms",
    "ITL ms",
    "E2EL ms",
    "decode tok/s",
    "E2E tok/s",
]
TIMING_NOTE = (
    "Milliseconds, p50 / p90 / p99, per docs/report.md's definitions for each API (Responses API: TTFT is the first "
    "*.delta event of any output). Embeddings have E2EL only. decode tok/s: (output tokens - 1) / (E2EL - TTFT), "
    "median per request; E2E tok/s: output tokens / E2EL, median per request."
)


def traffic_sections(t: Traffic) -> list[Section]:
    if not t.rows:
        return []
    rows, timing_rows = [], []
    marked = False
    for r in t.rows:
        row, counted = _traffic_row(r)
        rows.append(row)
        timing_rows.append(_timing_row(r, "*" if r.output_counted else ""))
        marked = marked or counted
    out = [
        Section("Traffic", TRAFFIC_COLUMNS, rows, _notes(t, marked), numeric={4, 7}),
        Section("Traffic timing", TIMING_COLUMNS, timing_rows, [TIMING_NOTE], numeric={3, 4, 5, 6, 7, 8, 9}),
    ]
    if t.fingerprint_changes:
        out.append(
            Section(
                "System fingerprint changes",
                ["requested model", "at", "exchange", "before", "after"],
                [[c.model, c.at, c.exchange, c.before, c.after] for c in t.fingerprint_changes],
                ["Consecutive requests of one model (in the order they started) that saw different fingerprints."],
            )
        )
    if t.sessions.sessions:
        out.append(_sessions_section(t))
    return out


def _sessions_section(t: Traffic) -> Section:
    s = t.sessions
    rows = [[r.session, str(r.exchanges), ", ".join(r.models) or "–", _counts(r.links)] for r in s.longest]
    return Section(
        "Agent sessions",
        ["session", "exchanges", "models", "linked by"],
        rows,
        [
            f"{s.sessions} session(s) of more than one exchange, {s.exchanges} exchange(s) in them; the longest "
            f"{len(rows)} above. Linked by: {_counts(s.links)} (previous_response_id, tool-call ids carried into the "
            "next request, or a client's session id; docs/report.md)."
        ],
        numeric={1},
    )


def _traffic_row(r: TrafficRow) -> tuple[list[str], bool]:
    """The row, and whether any of its token counts is counted rather than reported (marked *)."""
    mark = "*" if r.output_counted else ""
    known = r.input_reported + r.input_counted
    tokens_in = f"{r.input_tokens}" if known else "–"
    if r.input_counted:
        tokens_in += "*"
    if known and known < r.requests:
        tokens_in += f" ({known} of {r.requests})"
    if r.cached_input_tokens:
        tokens_in += f", {r.cached_input_tokens} cached"
    row = [
        r.endpoint,
        r.model,
        r.served_model,
        r.client,
        str(r.requests),
        _counts(r.statuses),
        _counts(r.outcomes),
        pct(r.error_rate),
        tokens_in,
        f"{r.output_tokens}{mark}",
        ", ".join(r.fingerprints) or "–",
    ]
    return row, bool(r.output_counted or r.input_counted)


def _timing_row(r: TrafficRow, mark: str) -> list[str]:
    tm = r.timing
    tok_s = f"{tm.tokens_per_s_median:.1f}{mark}" if tm.tokens_per_s_median is not None else "–"
    decode = f"{tm.decode_tokens_per_s_median:.1f}{mark}" if tm.decode_tokens_per_s_median is not None else "–"
    tpot = triple(tm.tpot_ms) + (mark if tm.tpot_ms.count else "")
    ttft, itl, e2el = triple(tm.ttft_ms), triple(tm.itl_ms), triple(tm.e2el_ms)
    return [r.endpoint, r.model, r.client, str(tm.streamed), ttft, tpot, itl, e2el, decode, tok_s]


def _notes(t: Traffic, marked: bool) -> list[str]:
    notes = [
        f"{t.exchanges} exchange(s), {t.untagged} without an X-Bench-Test tag. Error: not complete, no status or "
        "status >= 400, an error event, or a truncated stream. Tokens from usage."
    ]
    if marked:
        notes.append(
            "* counted for some requests (no usage): output tokens one per token event, input tokens one per word or "
            "punctuation mark of the request text (a tokenizer gives more)."
        )
    unknown = {k: n for r in t.rows for k, n in r.unknown_events.items()}
    if unknown:
        notes.append("Event types bench does not know (kept, counted): " + _counts(unknown))
    return notes
