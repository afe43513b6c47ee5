"""The Responses API (`/v1/responses`), streamed and not, rebuilt as a client would see it.

Its stream is typed events (`response.output_text.delta`, `response.function_call_arguments.delta`,
`response.completed`...) rather than chat chunks; this module folds them into the same ParsedExchange as
bench.core.parse does for Chat Completions, so that every evaluator and report reads both APIs alike:
- content: the `output_text` deltas (or an `output_text.done` / the final response's text when no delta came);
  reasoning: `reasoning_text` and `reasoning_summary_text` deltas; refusal: `refusal` deltas;
- tool calls: `function_call` output items (name and call id from `output_item.added`), arguments from the
  `function_call_arguments` deltas, or from the `.done` events when no delta came;
- finish_reason, in Chat Completions' words so that checks mean the same on both APIs: `response.completed` is
  `tool_calls` when the answer calls a function, else `stop`; `response.incomplete` is `length` for
  max_output_tokens and `content_filter` for a filtered answer; `response.failed` and an `error` event are
  `error_event` findings, like an error chunk in a chat stream;
- a stream without `response.completed`, `response.incomplete` or `response.failed` was cut (`no_done`,
  `truncated`);
- timing: a token event is any `*.delta` event with a non-empty delta (output of any kind: text, reasoning,
  refusal, function-call arguments, and the deltas of event types bench does not know); TTFT is the first, ITL the
  gaps between them, E2EL the last; output tokens from `usage.output_tokens`, else counted one per token event.
Event types bench does not know are counted in `unknown_events`, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from typing import Any

from bench.core.event_runs import Run, outside
from bench.core.parsed import ParsedExchange, ToolCall, error_event, finish_calls, load_json, set_timing
from bench.core.response_events import Event, Item, Response, decode_events, decode_response, parts
from bench.core.response_runs import response_run
from bench.core.sse import event_payloads, without_done

# Event types that carry no output of their own, or whose output is assembled here: not counted as unknown.
KNOWN_EVENTS = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
    }
)
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_REASONING_DELTAS = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})


class _Answer:
    """What the events of one response add up to so far."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, ToolCall] = {}  # by order of appearance
        self.by_index: dict[int, ToolCall] = {}  # by output_index
        self.by_item: dict[str, ToolCall] = {}  # by item id
        self.fragments: dict[int, list[str]] = {}  # argument deltas, by call order
        self.texted: set[int | None] = set()  # output indexes whose text came as deltas
        self.refused: set[int | None] = set()

    def call(self, output_index: int | None, item_id: str | None, item: Item | None = None) -> ToolCall:
        found = self.by_index.get(output_index) if output_index is not None else None
        if found is None and item_id:
            found = self.by_item.get(item_id)
        if found is None and item is not None and item.id:
            found = self.by_item.get(item.id)
        if found is None:
            found = ToolCall(index=len(self.calls))
            self.calls[found.index] = found
        if output_index is not None:
            self.by_index[output_index] = found
        for key in (item_id, item.id if item is not None else None):
            if key:
                self.by_item[key] = found
        if item is not None:
            found.id = item.call_id or found.id
            if item.name and not found.name:
                found.name = item.name
        return found

    def delta(self, kind: str, ev: Event, delta: str) -> None:
        """A text, arguments, reasoning or refusal delta."""
        sink = self._sink(kind, ev)
        if sink is not None:
            sink.append(delta)

    def deltas(self, kind: str, ev: Event, said: list[str]) -> None:
        """Non-empty deltas of events that are all `ev` but for the delta, as `delta` adds them one by one (a call
        named by output index or item id: looked up once, as each look-up after the first finds the same)."""
        sink = self._sink(kind, ev)
        if sink is not None:
            sink.extend(said)

    def _sink(self, kind: str, ev: Event) -> list[str] | None:
        """Where a delta of this kind of event goes (noting which outputs came as deltas), or None: not output."""
        if kind == "response.output_text.delta":
            self.texted.add(ev.output_index)
            return self.content
        if kind == "response.function_call_arguments.delta":
            return self.fragments.setdefault(self.call(ev.output_index, ev.item_id).index, [])
        if kind in _REASONING_DELTAS:
            return self.reasoning
        if kind == "response.refusal.delta":
            self.refused.add(ev.output_index)
            return self.refusal
        return None

    def item_event(self, kind: str, ev: Event) -> None:
        """An output item added or done, or a text, arguments or refusal done."""
        if kind == "response.output_item.added" or kind == "response.output_item.done":
            item = ev.item
            if item is not None and item.type == "function_call":
                call = self.call(ev.output_index, ev.item_id, item)
                if kind == "response.output_item.done":
                    self.arguments_done(call, item.arguments)
        elif kind == "response.function_call_arguments.done":
            self.arguments_done(self.call(ev.output_index, ev.item_id), ev.arguments)
        elif kind == "response.output_text.done":
            if ev.output_index not in self.texted and isinstance(ev.text, str):
                self.content.append(ev.text)
                self.texted.add(ev.output_index)
        elif kind == "response.refusal.done" and ev.output_index not in self.refused and isinstance(ev.refusal, str):
            self.refusal.append(ev.refusal)
            self.refused.add(ev.output_index)

    def arguments_done(self, call: ToolCall, arguments: Any) -> None:
        if not self.fragments.get(call.index) and isinstance(arguments, str) and arguments:
            self.fragments[call.index] = [arguments]

    def finish(self, p: ParsedExchange) -> None:
        for index, pieces in self.fragments.items():
            self.calls[index].arguments = "".join(pieces)
        p.content = "".join(self.content)
        p.reasoning = "".join(self.reasoning)
        p.refusal = "".join(self.refusal)
        finish_calls(p, self.calls)

    def empty(self) -> bool:
        return not (self.content or self.reasoning or self.refusal or self.calls)

    def add_output(self, output: Sequence[Item]) -> None:
        """The output items of a whole response object (a non-streamed body, or a final event's copy)."""
        for pos, item in enumerate(output):
            if item.type == "message":
                for part in parts(item.content):
                    if part.type == "output_text" and isinstance(part.text, str):
                        self.content.append(part.text)
                    elif part.type == "refusal" and isinstance(part.refusal, str):
                        self.refusal.append(part.refusal)
            elif item.type == "reasoning":
                for part in parts(item.summary) + parts(item.content):
                    if isinstance(part.text, str):
                        self.reasoning.append(part.text)
            elif item.type == "function_call":
                call = self.call(pos, item.id, item)
                self.arguments_done(call, item.arguments)


def finish_reason(response: Response | None, terminal: str | None, calls: bool) -> str | None:
    status = (response.status if response is not None else None) or (terminal or "").removeprefix("response.")
    if status == "completed":
        return "tool_calls" if calls else "stop"
    if status == "incomplete":
        details = response.incomplete_details if response is not None else None
        reason = details.get("reason") if isinstance(details, dict) else None
        return "length" if reason == "max_output_tokens" else "content_filter" if reason == "content_filter" else status
    return None


def _response_error(p: ParsedExchange, response: Response) -> None:
    if response.status == "failed" or response.error:
        error_event(p, response.error or "response.failed")


def parse_response_stream(
    p: ParsedExchange, chunks: Sequence[bytes], times: Sequence[int], max_tokens: int | None, keep_events: bool
) -> None:
    found = None if keep_events or max_tokens is not None else response_run(chunks)
    reader = _Reader(p)
    cut = None if found is None else _read_with_run(reader, chunks, times, *found)
    budget_cut = False
    if cut is None:
        stamps, payloads, events, cut, budget_cut = _stream_events(p, chunks, times, max_tokens)
        if keep_events:
            p.events.extend((t, obj) for t, obj in zip(stamps, map(load_json, payloads), strict=True) if obj)
        reader.events(stamps, events)
    _finish_stream(p, reader, cut, budget_cut)


def _finish_stream(p: ParsedExchange, reader: _Reader, cut: bool, budget_cut: bool) -> None:
    answer, token_times, final = reader.answer, reader.token_times, reader.final
    if final is not None and final.output and answer.empty():
        # A server that sends only the final response object: its output is the answer.
        answer.add_output(final.output)
    answer.finish(p)
    done = reader.terminal is not None
    p.finish_reason = finish_reason(final, reader.terminal, bool(p.tool_calls))
    if budget_cut:
        p.finish_reason, done = "length", True
    if reader.bad_json:
        p.findings.append("bad_event_json")
    if not done:
        p.findings.append("no_done")
    if cut or not done:
        p.findings.append("truncated")
    if answer.empty() and not token_times and p.status is not None and p.status < 400 and p.error is None:
        p.findings.append("empty_output")
    if p.usage is None and token_times:
        p.findings.append("no_usage")
    set_timing(p, token_times, len(token_times))


def _read_with_run(reader: _Reader, chunks: Sequence[bytes], times: Sequence[int], run: Run, template: Event) -> bool:
    """The stream read as its reads up to the run's first, the run folded in bulk, and the reads after it; whether
    it was cut."""
    rest = outside(chunks, times, run)  # `[DONE]` out
    events = decode_events(rest.payloads)
    reader.events(rest.times[: rest.before], events[: rest.before])
    reader.run(*run.bulk(times), template)
    reader.events(rest.times[rest.before :], events[rest.before :])
    return rest.cut


def _stream_events(
    p: ParsedExchange, chunks: Sequence[bytes], times: Sequence[int], max_tokens: int | None
) -> tuple[list[int], list[bytes], list[Event | None], bool, bool]:
    """The stream's events, decoded, with their times and payloads: cut at the token budget when one is given;
    (times, payloads, events, cut short, cut by the budget)."""
    stamps, payloads, cut = event_payloads(chunks, times)
    if b"[DONE]" in payloads:
        stamps, payloads = without_done(stamps, payloads)
    events = decode_events(payloads)
    budget_cut = False
    if max_tokens is not None:
        produced = 0
        for i, ev in enumerate(events):
            if produced >= max_tokens and ev is not None and _is_token(ev):
                stamps, payloads, events = stamps[:i], payloads[:i], events[:i]
                budget_cut = True
                p.findings.append("budget_max_tokens")
                cut = False
                break
            if ev is not None and _is_token(ev):
                produced += 1
    return stamps, payloads, events, cut, budget_cut


class _Reader:
    """Every event into `answer` and `p` (errors, model, usage), event by event (`events`) or a proved run at once
    (`run`): the token event times, the terminal event's type, the final response object, an event was not JSON."""

    __slots__ = ("answer", "bad_json", "final", "p", "terminal", "token_times")

    def __init__(self, p: ParsedExchange) -> None:
        self.p = p
        self.answer = _Answer()
        self.token_times: list[int] = []
        self.terminal: str | None = None
        self.final: Response | None = None
        self.bad_json = False

    def events(self, stamps: list[int], events: list[Event | None]) -> None:
        p, answer, token_times = self.p, self.answer, self.token_times
        unknown = p.unknown_events
        for t, ev in zip(stamps, events, strict=True):
            if ev is None:
                self.bad_json = True
                continue
            kind = ev.type or ""
            if kind not in KNOWN_EVENTS:
                unknown[kind] = unknown.get(kind, 0) + 1
            delta = ev.delta
            if kind.endswith(".delta"):
                if not delta:
                    continue
                token_times.append(t)
                if isinstance(delta, str):
                    answer.delta(kind, ev, delta)
            elif kind in TERMINAL:
                self.terminal = kind
                self.final = ev.response
                if self.final is not None:
                    _response_error(p, self.final)
                elif kind == "response.failed":
                    error_event(p, "response.failed")
            elif kind == "error":
                error_event(p, ev.message or ev.code or "error event")
            else:
                answer.item_event(kind, ev)
            response = ev.response
            if response is not None:
                if response.model:
                    p.model = response.model
                if response.usage:
                    p.usage = response.usage

    def run(self, run_times: Sequence[int], values: list[str], template: Event) -> None:
        """Events that are `template` (a delta event bench.core.response_runs covers) with each of `values` as its
        delta, as `events` would read them one by one: an empty delta is no token."""
        said = list(filter(None, values))
        if said:
            self.token_times.extend(compress(run_times, values))
            self.answer.deltas(template.type or "", template, said)


def _is_token(ev: Event) -> bool:
    return bool(ev.type and ev.type.endswith(".delta") and ev.delta)


def parse_response_body(
    p: ParsedExchange, chunks: Sequence[bytes], times: Sequence[int], max_tokens: int | None
) -> None:
    body = b"".join(chunks)
    if times:
        p.timing.e2el_us = times[-1]
    if not body:
        return
    response = decode_response(body)
    if response is None:
        if p.status is not None and p.status < 400:
            p.findings.append("bad_body_json")
        return
    if response.error:
        err = response.error
        p.error = str(err.get("message", err) if isinstance(err, dict) else err)
        if p.status is not None and p.status < 400:
            p.findings.append("error_event")
    p.model = response.model
    p.usage = response.usage or None
    answer = _Answer()
    answer.add_output(response.output or [])
    answer.finish(p)
    p.finish_reason = finish_reason(response, None, bool(p.tool_calls))
    if answer.empty() and p.status is not None and p.status < 400 and p.error is None:
        p.findings.append("empty_output")
    p.settle_whole_body(max_tokens)
