"""Rebuild a recorded exchange as an OpenAI client would have seen it.

From the raw bytes of every upstream read: SSE events (bench.core.sse), the assembled content, reasoning and tool calls
(fragments joined by index), finish_reason, usage, model, system_fingerprint; non-streamed JSON bodies too. Problems
are data (`findings`), never exceptions. Timing follows vLLM's serving benchmark (docs/report.md, "Timing"): a
"token event" is an event with non-empty `choices`; TTFT is the first one, ITL the gaps between consecutive ones,
E2EL the last one (usage-only chunk and [DONE] excluded), TPOT = (E2EL - TTFT) / (output tokens - 1).

PARSER_VERSION is part of the scorer's version: any change to what this module returns for the same bytes bumps it,
so rescoring shows the flips it causes.

The request's path says which API answered (bench.core.endpoints): Chat Completions and legacy Completions are parsed
here, the Responses API in bench.core.parse_responses, Embeddings (no output tokens: status, usage, model and E2EL) and
endpoints bench does not know as a plain body. Version 2: the endpoint is read from the path.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import orjson

from bench.core.cassette.records import Exchange
from bench.core.chunk_runs import ARGUMENTS, CONTENT, chat_run
from bench.core.chunks import Chunk, Delta, FunctionDelta, decode_chunk, decode_chunks
from bench.core.decoding import decoded_record_reads
from bench.core.endpoints import CHAT, RESPONSES, endpoint_of
from bench.core.event_runs import Run, outside
from bench.core.parsed import ParsedExchange, ToolCall, error_event, finish_calls, load_json, set_timing
from bench.core.sse import event_payloads, without_done

# 2: compressed bodies (Content-Encoding gzip, deflate, br) are parsed decoded; the Responses API, legacy
# Completions and Embeddings are parsed by endpoint. 3: the findings max_tokens (finish_reason length) and
# no_finish_reason (a stream the server ended without one).
PARSER_VERSION = 3


def parse_exchange(
    record: Exchange,
    *,
    max_tokens: int | None = None,
    deadline_us: int | None = None,
    keep_events: bool = False,
) -> ParsedExchange:
    """Parse one cassette exchange record. `max_tokens` / `deadline_us` cut the stream as if generation had stopped
    after that many completion tokens / the client had given up that long after sending the request.
    `keep_events` keeps every parsed chunk in `.events` (off by default: it triples the memory and GC work)."""
    response = record.response
    request = record.request
    chunks: list[bytes] = response.chunks
    times = list(accumulate(response.chunk_us or [0] * len(chunks)))
    # A compressed body is parsed decoded, each read's piece at that read's time (bench.core.decoding).
    decoded = decoded_record_reads(response.headers, chunks)
    chunks = decoded.pieces
    parsed = ParsedExchange(
        id=record.id,
        endpoint=endpoint_of(request.path),
        status=response.status,
        outcome=record.outcome,
        streamed=response.streamed,
        error=record.error,
        tags=dict(record.tags),
        request_body=request.body,
    )
    parsed.timing.loop_lag_us = record.timing.loop_lag_us
    # 0 is the records' "not recorded" (synthetic exchanges, records from before the field).
    parsed.timing.started_us = record.started or None
    parsed.timing.end_us = record.timing.end or None
    if deadline_us is not None and times and times[-1] > deadline_us:
        keep = sum(1 for t in times if t <= deadline_us)
        chunks, times = chunks[:keep], times[:keep]
        parsed.findings.append("budget_deadline")
        if parsed.outcome == "complete":
            parsed.outcome = "timeout"
    if parsed.status is not None and parsed.status >= 400:
        parsed.findings.append("http_error")
    if decoded.error is not None:
        parsed.findings.append("undecodable_body")
    _dispatch(parsed, chunks, times, max_tokens, keep_events)
    return parsed


def parse_stream(
    chunks: Sequence[bytes], times: Sequence[int], keep_events: bool = False, endpoint: str = CHAT
) -> ParsedExchange:
    """Parse a live SSE stream (e.g. in a driver) with absolute read times."""
    parsed = ParsedExchange(streamed=True, status=200, endpoint=endpoint)
    _dispatch(parsed, chunks, times, None, keep_events)
    return parsed


def _dispatch(
    p: ParsedExchange, chunks: Sequence[bytes], times: Sequence[int], max_tokens: int | None, keep_events: bool
) -> None:
    if p.endpoint == RESPONSES:
        from bench.core.parse_responses import parse_response_body, parse_response_stream

        if p.streamed:
            parse_response_stream(p, chunks, times, max_tokens, keep_events)
        else:
            parse_response_body(p, chunks, times, max_tokens)
    elif p.streamed:
        _parse_stream(p, chunks, times, max_tokens, keep_events)
    else:
        _parse_body(p, chunks, times, max_tokens)
    stop_findings(p)


# Findings that already say why a stream has no finish_reason: cut, failed, or no answer at all.
_NOT_CUT = frozenset({"truncated", "error_event", "empty_choices", "empty_output"})


def stop_findings(p: ParsedExchange) -> None:
    """Why the answer stopped, where a report must say so: at the token limit (`max_tokens`: the server's finish_reason
    `length`, not a what-if budget's cut, which is `budget_max_tokens`), or a stream that ended cleanly for the proxy
    (outcome complete, not `truncated`) without any finish_reason (`no_finish_reason`: the server cut the answer)."""
    if p.finish_reason == "length" and "budget_max_tokens" not in p.findings:
        p.findings.append("max_tokens")
    if not p.streamed or p.finish_reason is not None or p.outcome != "complete" or p.error is not None:
        return
    if p.status is not None and p.status < 400 and not _NOT_CUT.intersection(p.findings):
        p.findings.append("no_finish_reason")


def _parse_stream(
    p: ParsedExchange, chunks: Sequence[bytes], times: Sequence[int], max_tokens: int | None, keep_events: bool
) -> None:
    found = None if keep_events or max_tokens is not None else chat_run(chunks)
    fold = _Fold(p)
    if found is not None:
        _parse_with_run(p, fold, chunks, times, *found)
        return
    event_times, datas, cut, budget_cut, done = _stream_events(p, chunks, times, max_tokens)
    if keep_events:
        p.events.extend((t, obj) for t, obj in zip(event_times, map(load_json, datas), strict=True) if obj)
    decoded = decode_chunks(datas)
    fold.events(event_times, decoded)
    _name(p, decoded)
    _finish_stream(p, fold, cut, budget_cut, done)


def _parse_with_run(
    p: ParsedExchange, fold: _Fold, chunks: Sequence[bytes], times: Sequence[int], run: Run, template: Chunk, hole: int
) -> None:
    """The stream parsed as its reads before the run (the run's first read with them: it sets the state the rest
    continues), the run folded in bulk, and the reads after it."""
    first, end = run.start + 1, run.end
    rest = outside(chunks, times, run)
    decoded = decode_chunks(rest.payloads)
    fold.events(rest.times[: rest.before], decoded[: rest.before])
    if not fold.run(*run.bulk(times), template, hole):
        # Fragments that start another call's arguments: the run's reads (whole events) folded event by event.
        stamps, payloads, _ = event_payloads(chunks[first:end], times[first:end])
        fold.events(stamps, decode_chunks(payloads))
    fold.events(rest.times[rest.before :], decoded[rest.before :])
    _name(p, [*decoded[: rest.before], template, *decoded[rest.before :]])
    _finish_stream(p, fold, rest.cut, False, rest.done)


def _name(p: ParsedExchange, chunks: list[Chunk | None]) -> None:
    # The first chunk that names them, found after the loop: usually the first, so this costs one step.
    p.model = next((c.model for c in chunks if c is not None and c.model), None)
    p.system_fingerprint = next((c.system_fingerprint for c in chunks if c is not None and c.system_fingerprint), None)


def _finish_stream(p: ParsedExchange, fold: _Fold, cut: bool, budget_cut: bool, done: bool) -> None:
    token_times, counted = fold.finish()
    finish_calls(p, fold.calls)
    if budget_cut:
        # Generation stopped at the budget: the server would have ended the stream cleanly there.
        p.finish_reason, done = "length", True
    if fold.bad_json:
        p.findings.append("bad_event_json")
    if not done:
        p.findings.append("no_done")
    if cut or (not done and p.finish_reason is None):
        p.findings.append("truncated")
    if not token_times and p.status is not None and p.status < 400:
        p.findings.append("empty_choices")
    if p.usage is None and token_times:
        p.findings.append("no_usage")
    set_timing(p, token_times, counted)


def _stream_events(
    p: ParsedExchange, chunks: Sequence[bytes], times: Sequence[int], max_tokens: int | None
) -> tuple[list[int], list[bytes], bool, bool, bool]:
    """The stream's data events and their times, [DONE] taken out: (times, payloads, cut short, cut by the token
    budget, [DONE] seen)."""
    stamps, payloads, cut = event_payloads(chunks, times)
    budget_cut = False
    if max_tokens is not None:
        stamps, payloads, budget_cut = _cut_to_tokens(stamps, payloads, max_tokens)
        if budget_cut:
            p.findings.append("budget_max_tokens")
            cut = False
    done = b"[DONE]" in payloads
    if not done:
        return stamps, payloads, cut, budget_cut, done
    if payloads[-1] == b"[DONE]" and payloads.count(b"[DONE]") == 1:
        return stamps[:-1], payloads[:-1], cut, budget_cut, done
    stamps, payloads = without_done(stamps, payloads)
    return stamps, payloads, cut, budget_cut, done


class _Fold:
    """Content, reasoning, tool calls (into `calls`), usage, errors and finish_reason from the decoded chunks, as a
    client joins them, event by event (`events`) or a proved run at once (`run`)."""

    __slots__ = ("bad_json", "calls", "content", "counted", "p", "parts", "reasoning", "streaming", "token_times")

    def __init__(self, p: ParsedExchange) -> None:
        self.p = p
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.token_times: list[int] = []
        self.counted = 0
        self.bad_json = False
        self.calls: dict[int, ToolCall] = {}
        self.streaming: ToolCall | None = None  # the call that the last fragment went to
        self.parts: list[str] = []  # its argument fragments not yet joined into .arguments

    def events(self, event_times: list[int], decoded: list[Chunk | None]) -> None:
        p, calls, reasoning, parts = self.p, self.calls, self.reasoning, self.parts
        counted, streaming = self.counted, self.streaming
        # This loop runs for every event of every recorded stream not in a run: locals and bound methods, no calls
        # for the common content-only delta, and an inline path for the next argument fragment of the call being
        # streamed.
        add_content = self.content.append
        add_time = self.token_times.append
        for t, chunk in zip(event_times, decoded, strict=True):
            if chunk is None:
                self.bad_json = True
                continue
            if chunk.error:
                error_event(p, chunk.error)
            if chunk.usage:
                p.usage = chunk.usage
            choices = chunk.choices
            if not choices:
                continue
            add_time(t)
            first = choices[0]
            # n > 1: the choice with index 0 is the answer that is scored
            choice = next((c for c in choices if c.index == 0), None) if first.index else first
            if choice is None:
                continue
            delta = choice.delta
            if delta is None:
                if choice.text:  # legacy completions stream
                    add_content(choice.text)
                    counted += 1
            else:
                text = delta.content
                if text:
                    add_content(text)
                fragments = delta.tool_calls
                if (
                    fragments
                    and streaming is not None
                    and len(fragments) == 1
                    and (frag := fragments[0]).index == streaming.index
                    and frag.id is None
                    and frag.type is None
                    and (fn := frag.function) is not None
                    and fn.name is None
                    and type(args := fn.arguments) is str
                    and delta.function_call is None
                    and not (delta.reasoning_content or delta.reasoning)
                ):
                    parts.append(args)
                    counted += 1
                elif fragments or delta.function_call or delta.reasoning_content or delta.reasoning:
                    if parts and streaming is not None:
                        streaming.arguments += "".join(parts)
                        parts.clear()
                    if _apply_delta(delta, reasoning, calls) or text:
                        counted += 1
                    streaming = _single_call(delta, calls)
                elif text:
                    counted += 1
            if choice.finish_reason:
                p.finish_reason = choice.finish_reason
        self.counted, self.streaming = counted, streaming

    def run(self, run_times: Sequence[int], values: list[str], template: Chunk, hole: int) -> bool:
        """Events that are `template` with each of `values` in its `hole`, folded as `events` would fold them one by
        one; False (nothing folded) where the state they start in is not one this covers."""
        delta = template.choices[0].delta  # type: ignore[index]  # chat_run proved one choice with a delta
        assert delta is not None
        if hole == ARGUMENTS:
            frag = delta.tool_calls[0]  # type: ignore[index]
            if self.streaming is None or frag.index != self.streaming.index:
                return False
            self.parts.extend(values)  # the inline path: every fragment counts, empty or not
            self.counted += len(values)
        elif hole == CONTENT:
            said = list(filter(None, values))
            self.content.extend(said)
            self.counted += len(said)
        else:  # REASONING_CONTENT
            said = list(filter(None, values))
            if said:
                self._join_parts()
                self.streaming = None
                self.reasoning.extend(said)
                self.counted += len(said)
        self.token_times.extend(run_times)
        finish = template.choices[0].finish_reason  # type: ignore[index]
        if finish:
            self.p.finish_reason = finish
        return True

    def finish(self) -> tuple[list[int], int]:
        self._join_parts()
        self.p.content = "".join(self.content)
        self.p.reasoning = "".join(self.reasoning)
        return self.token_times, self.counted

    def _join_parts(self) -> None:
        """The argument fragments taken inline, joined into the call they went to (the per-event loop does so with
        its locals)."""
        if self.parts and self.streaming is not None:
            self.streaming.arguments += "".join(self.parts)
            self.parts.clear()


def _apply_delta(delta: Delta, reasoning: list[str], calls: dict[int, ToolCall]) -> int:
    """Fold a delta's reasoning and tool-call parts into the answer; returns 1 if it carried any of them."""
    produced = 0
    think = delta.reasoning_content or delta.reasoning
    if think and isinstance(think, str):
        reasoning.append(think)
        produced = 1
    fragments = delta.tool_calls
    if fragments:
        produced = 1
        for pos, frag in enumerate(fragments):
            idx = pos if frag.index is None else frag.index
            call = calls.get(idx)
            if call is None:
                call = calls[idx] = ToolCall(index=idx)
            if frag.id:
                call.id = frag.id
            if frag.type:
                call.type = frag.type
            if frag.function is not None:
                _add_function(call, frag.function)
    legacy = delta.function_call
    # llama.cpp's server sends the same fragment both as function_call and tool_calls: count it once.
    if legacy is not None and not fragments:
        produced = 1
        _add_function(calls.setdefault(0, ToolCall(index=0)), legacy)
    return produced


def _single_call(delta: Delta, calls: dict[int, ToolCall]) -> ToolCall | None:
    """The call that later bare argument fragments may go to inline: the one this delta's only fragment named."""
    fragments = delta.tool_calls
    if not fragments or len(fragments) != 1 or delta.function_call is not None:
        return None
    frag = fragments[0]
    return calls.get(0 if frag.index is None else frag.index)


def _add_function(call: ToolCall, fn: FunctionDelta) -> None:
    # Servers that repeat the name in every fragment (llama.cpp) must not get it concatenated.
    if fn.name and fn.name != call.name:
        call.name += fn.name
    args = fn.arguments
    if args:
        call.arguments += args if isinstance(args, str) else orjson.dumps(args).decode()


def _cut_to_tokens(stamps: list[int], payloads: list[bytes], max_tokens: int) -> tuple[list[int], list[bytes], bool]:
    """Keep events up to the one that produced the max_tokens-th output token.

    Approximation: one token per content/tool delta event, which is what vLLM, llama.cpp and OpenAI stream; a
    server that packs several tokens per event is cut later than it should be.
    """
    produced = 0
    for i, data in enumerate(payloads):
        if produced >= max_tokens and data != b"[DONE]":
            return stamps[:i], payloads[:i], True
        chunk = decode_chunk(data) if data != b"[DONE]" else None
        delta = chunk.choices[0].delta if chunk is not None and chunk.choices else None
        if delta is not None and (delta.content or _apply_delta(delta, [], {})):
            produced += 1
    return stamps, payloads, False


def _parse_body(p: ParsedExchange, chunks: Sequence[bytes], times: Sequence[int], max_tokens: int | None) -> None:
    body = b"".join(chunks)
    if times:
        p.timing.e2el_us = times[-1]
    if not body:
        return
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        if p.status is not None and p.status < 400:
            p.findings.append("bad_body_json")
        return
    if not isinstance(doc, dict):
        return
    if doc.get("error"):
        err = doc["error"]
        p.error = str(err.get("message", err) if isinstance(err, dict) else err)
    p.model = doc.get("model")
    p.system_fingerprint = doc.get("system_fingerprint")
    p.usage = doc.get("usage") or None
    choices = doc.get("choices") or []
    first = next((c for c in choices if c.get("index", 0) == 0), None)
    if first is not None:
        p.finish_reason = first.get("finish_reason")
        message = first.get("message")
        if message is None:
            p.content = first.get("text") or ""
        else:
            p.content = message.get("content") or ""
            p.reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
            calls: dict[int, ToolCall] = {}
            for i, tc in enumerate(message.get("tool_calls") or []):
                fn = tc.get("function") or {}
                args = fn.get("arguments", "")
                calls[i] = ToolCall(
                    index=i,
                    id=tc.get("id"),
                    name=fn.get("name") or "",
                    arguments=args if isinstance(args, str) else orjson.dumps(args).decode(),
                    type=tc.get("type") or "function",
                )
            finish_calls(p, calls)
    elif "choices" in doc and p.status is not None and p.status < 400:
        p.findings.append("empty_choices")
    p.settle_whole_body(max_tokens)
