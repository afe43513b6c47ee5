"""One job: a catalog test for one model and epoch, every attempt of every turn sent through the proxy.

Single-turn tests are one request (plus retries). Multi-turn tool tasks get a fresh workspace; the model's tool
calls are executed there and their results sent back as `tool` messages until it stops calling tools or a limit
(max_turns, max_calls) is reached.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from bench.catalog import fixture_dir
from bench.catalog.driver.client import OK, AttemptResult, post_chat
from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.retry import backoff_delay, retryable
from bench.catalog.model import TestSpec
from bench.core.endpoints import CHAT, RESPONSES
from bench.core.parsed import ParsedExchange, ToolCall
from bench.core.responses_request import responses_from_chat

ENDPOINT_PATHS = {"chat": "chat/completions", "responses": "responses"}
NO_RUNNER = "error: this test gives no way to run tools; answer from what you know"


@dataclass(frozen=True)
class Job:
    test: TestSpec
    model: str
    epoch: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.test.id, self.model, self.epoch)


@dataclass
class JobResult:
    job: Job
    ok: bool
    requests: int = 0
    retries: int = 0
    turns: int = 0
    error: str | None = None


@dataclass
class Sender:
    """What every request of a run shares: where to send, the run's tags, the config."""

    session: aiohttp.ClientSession
    url: str  # the API base, `.../v1`
    run_id: str
    cfg: RecordConfig
    auth: str | None = field(default=None, repr=False)
    rng: random.Random = field(default_factory=random.Random)
    on_attempt: Callable[[AttemptResult], None] | None = None
    # Where a line for the user goes (a capped Retry-After); said once a run.
    say: Callable[[str], None] | None = None
    capped: bool = False

    def retry_after(self, model: str, asked: float | None) -> float | None:
        """The server's Retry-After, capped at retry_after_max; the first time the cap is hit, a line says so."""
        cap = self.cfg.retry_after_max
        if asked is None or asked <= cap:
            return asked
        if not self.capped:
            self.capped = True
            line = (
                f"bench record: {model}: the server asked to wait {asked:g} s before retrying (Retry-After); waiting "
                f"retry_after_max {cap:g} s instead (set retry_after_max in bench.yaml to wait longer)"
            )
            (self.say or _stderr)(line)
        return cap

    def headers(self, job: Job, turn: int, attempt: int) -> dict[str, str]:
        out = {
            "Content-Type": "application/json",
            "X-Bench-Run": self.run_id,
            "X-Bench-Test": job.test.id,
            "X-Bench-Model": job.model,
            "X-Bench-Epoch": str(job.epoch),
            "X-Bench-Turn": str(turn),
            "X-Bench-Attempt": str(attempt),
        }
        if self.cfg.stream and self.cfg.idle_timeout:
            # A recording proxy records this client's leaving at its idle limit as a timeout (bench.proxy.forward).
            out["X-Bench-Idle-Timeout"] = f"{self.cfg.idle_timeout:g}"
        if self.auth:
            out["Authorization"] = f"Bearer {self.auth}"
        return out


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def request_body(job: Job, messages: list[Mapping[str, Any]], cfg: RecordConfig) -> dict[str, Any]:
    test = job.test
    body: dict[str, Any] = {"model": job.model, "messages": messages}
    if test.tools:
        body["tools"] = list(test.tools)
    if cfg.temperature is not None:
        body["temperature"] = cfg.temperature
    seed = cfg.seed_for(job.epoch)
    if seed is not None:
        # per-epoch (seed + epoch): repeats are independent samples; fixed: the same seed N times, to see whether
        # the backend answers the same (docs/record.md, "Seeds").
        body["seed"] = seed
    # The run's params first, the test's own over them: a test that needs a value keeps it.
    params = {**cfg.params, **test.params}
    key = "max_completion_tokens" if "max_completion_tokens" in params else "max_tokens"
    wanted = params.pop(key, None)
    body.update(params)
    floor = cfg.max_tokens_default
    limit = max(x for x in (wanted, floor, 0) if isinstance(x, int))
    if limit:
        body[key] = limit
    if cfg.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


async def send_with_retries(
    sender: Sender, job: Job, turn: int, messages: list[Mapping[str, Any]]
) -> tuple[AttemptResult, int]:
    """The final attempt's result and the number of attempts made."""
    cfg = sender.cfg
    api = cfg.api_for(job.test.id)
    chat = request_body(job, messages, cfg)
    body = orjson.dumps(responses_from_chat(chat) if api == "responses" else chat)
    url = f"{sender.url}/{ENDPOINT_PATHS[api]}"
    attempt = 0
    while True:
        attempt += 1
        result = await post_chat(
            sender.session,
            url,
            body,
            sender.headers(job, turn, attempt),
            timeout=cfg.timeout_for(job.model),
            idle_timeout=cfg.idle_timeout if cfg.stream else None,
            endpoint=RESPONSES if api == "responses" else CHAT,
        )
        if sender.on_attempt is not None:
            sender.on_attempt(result)
        if result.kind == OK or attempt > cfg.max_retries or not retryable(result, retry_timeouts=cfg.retry_timeouts):
            return result, attempt
        asked = sender.retry_after(job.model, result.retry_after)
        await asyncio.sleep(backoff_delay(attempt, asked, base=cfg.backoff_base, cap=cfg.backoff_max, rng=sender.rng))


def assistant_message(parsed: ParsedExchange, turn: int) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": parsed.content or None}
    if parsed.tool_calls:
        msg["tool_calls"] = [
            {
                "id": call_id(c, turn),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in parsed.tool_calls
        ]
    return msg


def call_id(call: ToolCall, turn: int) -> str:
    return call.id or f"call_t{turn}_{call.index}"


def should_continue(test: TestSpec, parsed: ParsedExchange, turn: int, calls_before: int) -> bool:
    """Whether the conversation goes on after this turn's answer (resume applies the same rule to recordings)."""
    if not test.multi_turn or not parsed.tool_calls:
        return False
    if turn + 1 >= test.limits.max_turns:
        return False
    max_calls = test.limits.max_calls
    return not (max_calls and calls_before + len(parsed.tool_calls) >= max_calls)


async def run_job(sender: Sender, job: Job) -> JobResult:
    test = job.test
    messages: list[Mapping[str, Any]] = [dict(m) for m in test.messages]
    outcome = JobResult(job, ok=False)
    workspace = None
    if test.workspace is not None:
        from bench.workspace import ToolWorkspace

        ws = test.workspace
        workspace = await asyncio.to_thread(
            ToolWorkspace.create, fixture_dir(ws.fixture), ws.allow_commands, tools=ws.tools
        )
    try:
        calls = 0
        for turn in range(max(1, test.limits.max_turns)):
            result, attempts = await send_with_retries(sender, job, turn, messages)
            outcome.requests += attempts
            outcome.retries += attempts - 1
            outcome.turns = turn + 1
            if not result.ok or result.parsed is None:
                outcome.error = result.error or result.kind
                return outcome
            parsed = result.parsed
            if not should_continue(test, parsed, turn, calls):
                outcome.ok = True
                return outcome
            messages.append(assistant_message(parsed, turn))
            for call in parsed.tool_calls:
                calls += 1
                if workspace is None:
                    content = NO_RUNNER
                else:
                    res = await asyncio.to_thread(workspace.call, call.name, call.arguments)
                    content = res.content
                messages.append({"role": "tool", "tool_call_id": call_id(call, turn), "content": content})
        outcome.ok = True
        return outcome
    finally:
        if workspace is not None:
            await asyncio.to_thread(workspace.close)
