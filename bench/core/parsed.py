"""What a parsed exchange is: the exchange as an OpenAI client would have seen it (content, reasoning, tool calls,
finish_reason, usage, timing, findings), and the helpers both parsers (bench.core.parse for Chat Completions and legacy
Completions, bench.core.parse_responses for the Responses API) fill it with."""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import sub
from typing import Any

import orjson

from bench.core.endpoints import CHAT
from bench.core.usage import usage_tokens

# Text that a model meant as a tool call but wrote as prose (Hermes/ChatML tags, bare JSON calls).
_TEXT_TOOL_CALL = re.compile(
    r"<tool_call>|<function[=>]|\[TOOL_CALLS\]|\{\s*\"(?:name|function)\"\s*:\s*\"[^\"]+\"\s*,\s*\"(?:arguments|parameters)\"",
)


@dataclass(slots=True)
class ToolCall:
    index: int
    id: str | None = None
    name: str = ""
    arguments: str = ""
    type: str = "function"
    parsed_arguments: Any = None
    valid_json: bool = False

    def finish(self) -> None:
        text = self.arguments.strip() or "{}"
        try:
            self.parsed_arguments = orjson.loads(text)
            self.valid_json = True
        except orjson.JSONDecodeError:
            self.parsed_arguments = None
            self.valid_json = False


@dataclass(slots=True)
class Timing:
    ttft_us: int | None = None
    e2el_us: int | None = None
    tpot_us: float | None = None
    # A list from the parser; the scorer holds it as an int32/int64 array (compact_itl), as its parse cache gives it.
    itl_us: Sequence[int] = field(default_factory=list)
    output_tokens: int | None = None
    tokens_source: str | None = None  # "usage" or "counted"
    n_events: int = 0
    loop_lag_us: int | None = None  # the recording proxy's longest event-loop stall during the exchange
    # When the exchange started (wall clock, microseconds since the epoch) and ended (microseconds after its start,
    # the whole response read): a multi-turn task's wall time spans its first start to its last end.
    started_us: int | None = None
    end_us: int | None = None


def compact_itl(gaps: Sequence[int]) -> array[int]:
    # Every result is held until the end (the scores file is sorted): a list of Python ints costs 36 B per event,
    # 11 KB for a 300-token stream, an int32 array 4 B (gaps up to 35 minutes; longer ones take int64).
    # scores_io writes it back as the same JSON list. An array is already compact: kept as it is (the unit compacts a
    # parse's gaps once, and its traffic line and its turn share them; nothing changes them afterwards).
    if isinstance(gaps, array):
        return gaps
    try:
        return array("i", gaps)
    except OverflowError:
        return array("q", gaps)


@dataclass
class ParsedExchange:
    id: str = ""
    endpoint: str = CHAT
    status: int | None = None
    outcome: str = "complete"
    streamed: bool = False
    content: str = ""
    reasoning: str = ""
    refusal: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    error: str | None = None
    findings: list[str] = field(default_factory=list)
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    timing: Timing = field(default_factory=Timing)
    tags: dict[str, str] = field(default_factory=dict)
    request_body: bytes = b""
    # Event types of the endpoint's stream that the parser does not know, and how often each came.
    unknown_events: dict[str, int] = field(default_factory=dict)

    @cached_property
    def request_json(self) -> dict[str, Any] | None:
        """The request body as JSON (messages, tools, sampling), or None if it was not a JSON object."""
        try:
            value = orjson.loads(self.request_body) if self.request_body else None
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def output_tokens_from_usage(self) -> int | None:
        return usage_tokens(self.usage).output

    def settle_whole_body(self, max_tokens: int | None) -> None:
        """Output tokens of a non-streamed answer from its usage, and the test's token budget applied to it: a whole
        body has no per-token boundary, so past the budget the proportional prefix of the text is kept."""
        output = self.output_tokens_from_usage()
        if output is not None:
            self.timing.output_tokens, self.timing.tokens_source = output, "usage"
        if max_tokens is not None and output is not None and output > max_tokens:
            keep = int(len(self.content) * max_tokens / output)
            self.content = self.content[:keep]
            self.finish_reason = "length"
            self.findings.append("budget_max_tokens")

    @property
    def ok(self) -> bool:
        return self.outcome == "complete" and self.status is not None and self.status < 400


def error_event(p: ParsedExchange, err: Any) -> None:
    if "error_event" not in p.findings:
        p.findings.append("error_event")
    p.error = str(err.get("message", err) if isinstance(err, dict) else err)


def finish_calls(p: ParsedExchange, calls: dict[int, ToolCall]) -> None:
    p.tool_calls = [calls[i] for i in sorted(calls)]
    for call in p.tool_calls:
        call.finish()
    if any(not c.valid_json for c in p.tool_calls):
        p.findings.append("invalid_tool_json")
    if not p.tool_calls and _TEXT_TOOL_CALL.search(p.content):
        p.findings.append("text_tool_call")


def set_timing(p: ParsedExchange, token_times: list[int], counted: int) -> None:
    timing = p.timing
    timing.n_events = len(token_times)
    completion = p.output_tokens_from_usage()
    if completion is not None and "budget_max_tokens" not in p.findings and "budget_deadline" not in p.findings:
        timing.output_tokens, timing.tokens_source = completion, "usage"
    else:
        timing.output_tokens, timing.tokens_source = counted, "counted"
    if not token_times:
        return
    timing.ttft_us = token_times[0]
    timing.e2el_us = token_times[-1]
    timing.itl_us = list(map(sub, token_times[1:], token_times[:-1]))
    if timing.output_tokens and timing.output_tokens > 1:
        timing.tpot_us = (timing.e2el_us - timing.ttft_us) / (timing.output_tokens - 1)


def load_json(data: bytes) -> dict[str, Any] | None:
    """An event as a plain JSON object, for callers that keep the events."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
