"""The stream timeline of one exchange: every parsed event at its recorded arrival time, TTFT, and long gaps."""

from __future__ import annotations

from statistics import median
from typing import Any

import msgspec

from bench.core.parsed import ParsedExchange

# A gap between token events this many times the exchange's median inter-token latency is highlighted.
GAP_FACTOR = 3.0
# Marks drawn at most: a stream of more events keeps every long gap, the first and last event and an even sample of
# the rest (a hostile or huge stream must not make a page of a million marks).
MAX_MARKS = 4000
TIP_CHARS = 200  # of an event's text, shown when a mark is hovered


class Event(msgspec.Struct):
    t_us: int
    token: bool  # carries output (a "token event" in the timing definitions: docs/report.md)
    text: str
    gap: bool  # the wait before this token event was long


class Timeline(msgspec.Struct):
    events: list[Event]
    token_events: int
    total_events: int  # events in the stream (`events` may hold a sample of them: MAX_MARKS)
    ttft_us: int | None
    e2el_us: int | None
    # (output tokens - 1) / (E2EL - TTFT): the speed the stream was served at once it started
    decode_tokens_per_s: float | None = None


def _text(obj: dict[str, Any]) -> tuple[bool, str]:
    """(is a token event, the text it carried) for Chat Completions, legacy Completions and Responses events."""
    choices = obj.get("choices")
    if isinstance(choices, list) and choices:
        choice = choices[0] if isinstance(choices[0], dict) else {}
        delta = choice.get("delta")
        if isinstance(delta, dict):
            parts = [delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning")]
            for call in delta.get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    parts += [fn.get("name"), fn.get("arguments")]
            return True, "".join(p for p in parts if isinstance(p, str))
        return True, str(choice.get("text") or "")
    kind = obj.get("type")
    if isinstance(kind, str):
        delta = obj.get("delta")
        return kind.endswith(".delta"), delta if isinstance(delta, str) else kind
    return False, "usage" if obj.get("usage") else ""


def timeline(parsed: ParsedExchange) -> Timeline:
    """From an exchange parsed with keep_events=True."""
    events = []
    last: int | None = None
    gaps: list[int] = []
    for t, obj in parsed.events:
        token, text = _text(obj)
        events.append(Event(t_us=t, token=token, text=text[:TIP_CHARS], gap=False))
        if token:
            if last is not None:
                gaps.append(t - last)
            last = t
    if len(gaps) >= 2:
        bound = GAP_FACTOR * max(median(gaps), 1)
        last = None
        for event in events:
            if event.token:
                event.gap = last is not None and event.t_us - last > bound
                last = event.t_us
    return Timeline(
        events=_sample(events),
        token_events=sum(e.token for e in events),
        total_events=len(events),
        ttft_us=parsed.timing.ttft_us,
        e2el_us=parsed.timing.e2el_us,
        decode_tokens_per_s=1e6 / tpot if (tpot := parsed.timing.tpot_us) else None,
    )


def _sample(events: list[Event]) -> list[Event]:
    if len(events) <= MAX_MARKS:
        return events
    step = len(events) / MAX_MARKS
    keep = {int(i * step) for i in range(MAX_MARKS)} | {len(events) - 1}
    return [e for i, e in enumerate(events) if i in keep or e.gap]
