"""One HTTP attempt at a chat completion, read the way a client reads it and parsed with bench.core.parse.

The driver needs the assembled answer (tool calls above all) to run multi-turn tool loops, so it parses the SSE
stream itself, through bench.core.parse's live helpers rather than a second parser.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from bench.core.cassette.records import Exchange, Request, Response
from bench.core.endpoints import CHAT, RESPONSES
from bench.core.parse import parse_exchange, parse_stream
from bench.core.parsed import ParsedExchange

# Outcomes of an attempt, in the driver's own words (the proxy records its own view in the cassette).
OK = "ok"
HTTP_ERROR = "http_error"
TIMEOUT = "timeout"
CONNECTION = "connection_error"
TRUNCATED = "truncated"
EMPTY = "empty_choices"


@dataclass
class AttemptResult:
    kind: str
    status: int | None = None
    parsed: ParsedExchange | None = None
    error: str | None = None
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.kind == OK


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """`retry-after-ms` (OpenAI's), else `Retry-After` in seconds or as an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def judge(parsed: ParsedExchange) -> str:
    """The attempt's kind from a parsed response (shared with resume, which judges recorded exchanges)."""
    if parsed.status is None:
        return CONNECTION
    if parsed.status >= 400:
        return HTTP_ERROR
    if parsed.outcome == "timeout":
        return TIMEOUT
    if parsed.outcome in ("upstream_error", "client_disconnected"):
        return CONNECTION
    if "truncated" in parsed.findings or parsed.outcome == "truncated":
        return TRUNCATED
    if "empty_choices" in parsed.findings or "empty_output" in parsed.findings:
        return EMPTY
    return OK


async def post_chat(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    idle_timeout: float | None,
    endpoint: str = CHAT,
) -> AttemptResult:
    t0 = time.monotonic_ns()
    chunks: list[bytes] = []
    times: list[int] = []
    status: int | None = None
    try:
        async with asyncio.timeout(timeout):
            async with session.post(url, data=body, headers=dict(headers)) as resp:
                status = resp.status
                streamed = resp.headers.get("Content-Type", "").startswith("text/event-stream")
                # The idle watchdog applies to streams only: a non-streamed answer is silent until it is complete.
                idle = idle_timeout if streamed else None
                while True:
                    if idle is None:
                        chunk = await resp.content.readany()
                    else:
                        try:
                            chunk = await asyncio.wait_for(resp.content.readany(), idle)
                        except TimeoutError:
                            # close() drops the connection now; leaving the block would wait for the body to end.
                            resp.close()
                            return AttemptResult(TIMEOUT, status, error=f"stream silent for {idle:g} s (idle_timeout)")
                    if not chunk:
                        break
                    chunks.append(chunk)
                    times.append((time.monotonic_ns() - t0) // 1000)
                retry_after = retry_after_seconds(resp.headers)
    except TimeoutError:
        return AttemptResult(TIMEOUT, status, error=f"no complete answer within {timeout:g} s (request_timeout)")
    except aiohttp.ClientPayloadError as exc:
        return AttemptResult(TRUNCATED, status, error=f"response cut short: {exc}")
    except aiohttp.ClientError as exc:
        return AttemptResult(CONNECTION, status, error=f"{type(exc).__name__}: {exc}")
    assert status is not None  # set before any body was read
    if streamed and status < 400:
        parsed = parse_stream(chunks, times, endpoint=endpoint)
        parsed.status = status
    else:
        path = "/v1/responses" if endpoint == RESPONSES else "/v1/chat/completions"
        record = Exchange(
            request=Request(path=path),
            response=Response(status=status, chunks=chunks, chunk_us=_deltas(times), streamed=streamed),
        )
        parsed = parse_exchange(record)
    kind = judge(parsed)
    return AttemptResult(kind, status, parsed, error=parsed.error, retry_after=retry_after)


def _deltas(times: list[int]) -> list[int]:
    out: list[int] = []
    prev = 0
    for t in times:
        out.append(t - prev)
        prev = t
    return out
