"""One job's conversation: the request body (seed per epoch, max_tokens floor), retries against a real server,
and the tool loop's stopping rules."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bench.catalog import fixture_dir
from bench.catalog.driver import conversation
from bench.catalog.driver.client import AttemptResult
from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.conversation import (
    NO_RUNNER,
    Job,
    Sender,
    assistant_message,
    call_id,
    request_body,
    run_job,
    send_with_retries,
    should_continue,
)
from bench.catalog.model import Limits, Workspace
from bench.catalog.model import TestSpec as Spec
from bench.core.parsed import ParsedExchange, ToolCall
from bench.core.serving import listen

TOOLS = ({"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},)


ONE_TURN = Limits()


def make_spec(params: dict[str, Any] | None = None, limits: Limits = ONE_TURN, tools: tuple[Any, ...] = ()) -> Spec:
    messages = ({"role": "user", "content": "hi"},)
    return Spec("s.t", "s", "c", "sc", "d", messages, tools=tools, params=params or {}, limits=limits)


def test_each_epoch_sends_its_own_seed() -> None:
    cfg = RecordConfig(seed=7, temperature=0.5)
    bodies = [
        request_body(Job(make_spec(), "m", epoch), [{"role": "user", "content": "hi"}], cfg) for epoch in (0, 1, 2)
    ]
    assert [b["seed"] for b in bodies] == [7, 8, 9]
    assert {b["temperature"] for b in bodies} == {0.5} and {b["model"] for b in bodies} == {"m"}
    unseeded = request_body(Job(make_spec(), "m", 3), [], RecordConfig())
    assert "seed" not in unseeded and "temperature" not in unseeded


def test_a_fixed_seed_is_sent_unchanged_by_every_epoch() -> None:
    cfg = RecordConfig(seed=7, seed_mode="fixed", temperature=0.0)
    bodies = [request_body(Job(make_spec(), "m", epoch), [], cfg) for epoch in (0, 1, 2, 9)]
    assert [b["seed"] for b in bodies] == [7, 7, 7, 7]


def test_run_params_go_under_the_tests_own() -> None:
    cfg = RecordConfig(params={"top_p": 0.9, "reasoning_effort": "low", "stop": ["run"]})
    body = request_body(Job(make_spec({"stop": ["test"]}), "m", 0), [], cfg)
    # The run's values reach every request; where the test sets the same field, the test's value is sent.
    assert (body["top_p"], body["reasoning_effort"], body["stop"]) == (0.9, "low", ["test"])
    assert "top_p" not in request_body(Job(make_spec(), "m", 0), [], RecordConfig())


@pytest.mark.parametrize(
    ("params", "floor", "key", "want"),
    [
        ({}, 1024, "max_tokens", 1024),  # the floor when the test says nothing
        ({"max_tokens": 64}, 1024, "max_tokens", 1024),  # a test's lower max_tokens cannot go under the floor
        ({"max_tokens": 4096}, 1024, "max_tokens", 4096),  # a higher one raises it
        ({"max_completion_tokens": 2048}, 1024, "max_completion_tokens", 2048),  # the newer name is kept
        ({"max_completion_tokens": 8}, 1024, "max_completion_tokens", 1024),
        ({"max_tokens": 64}, None, "max_tokens", 64),  # no floor
        ({}, None, "max_tokens", None),  # nothing at all: not sent
    ],
)
def test_max_tokens_floor(params: dict[str, Any], floor: int | None, key: str, want: int | None) -> None:
    body = request_body(Job(make_spec(params), "m", 0), [], RecordConfig(max_tokens_default=floor))
    assert body.get(key) == want
    other = "max_tokens" if key == "max_completion_tokens" else "max_completion_tokens"
    assert other not in body


def test_body_carries_tools_params_and_stream_options() -> None:
    body = request_body(Job(make_spec({"stop": ["x"]}, tools=TOOLS), "m", 0), [{"role": "user"}], RecordConfig())
    assert body["tools"] == list(TOOLS) and body["stop"] == ["x"] and body["messages"] == [{"role": "user"}]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    plain = request_body(Job(make_spec(), "m", 0), [], RecordConfig(stream=False))
    assert "stream" not in plain and "stream_options" not in plain and "tools" not in plain


def parsed_with(calls: int) -> ParsedExchange:
    return ParsedExchange(tool_calls=[ToolCall(i, name="now", arguments="{}") for i in range(calls)])


def test_should_continue_follows_turn_and_call_limits() -> None:
    multi = make_spec(limits=Limits(max_turns=3, max_calls=4))
    assert should_continue(multi, parsed_with(1), 0, 0)
    assert not should_continue(multi, parsed_with(0), 0, 0)  # an answer without calls ends it
    assert not should_continue(multi, parsed_with(1), 2, 0)  # turn 3 of 3 was the last
    assert should_continue(multi, parsed_with(1), 1, 2)
    assert not should_continue(multi, parsed_with(2), 1, 2)  # 4 calls reached
    assert not should_continue(make_spec(), parsed_with(1), 0, 0)  # single-turn
    unlimited = make_spec(limits=Limits(max_turns=5, max_calls=0))
    assert should_continue(unlimited, parsed_with(3), 0, 100)


def test_assistant_message_replays_the_calls_with_stable_ids() -> None:
    parsed = ParsedExchange(
        content="", tool_calls=[ToolCall(0, id="call_x", name="a", arguments='{"k":1}'), ToolCall(1, name="b")]
    )
    msg = assistant_message(parsed, 2)
    assert msg == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_x", "type": "function", "function": {"name": "a", "arguments": '{"k":1}'}},
            {"id": "call_t2_1", "type": "function", "function": {"name": "b", "arguments": ""}},
        ],
    }
    assert assistant_message(ParsedExchange(content="hi"), 0) == {"role": "assistant", "content": "hi"}
    assert call_id(ToolCall(3), 4) == "call_t4_3"


class Server:
    """A real chat endpoint that answers from a script: a status and headers per attempt, then the answer."""

    def __init__(self, script: list[tuple[int, dict[str, str]]], answers: list[dict[str, Any]]) -> None:
        self.script = script
        self.answers = answers
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        # A status for the first attempt of every turn (a server that fails once per request it is new to).
        self.first_attempt_status: int | None = None
        # Headers sent, then silence (a stream: one event first) until the client gives up.
        self.stall: str | None = None

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((dict(request.headers), await request.json()))
        if self.first_attempt_status is not None and request.headers["X-Bench-Attempt"] == "1":
            self.script.insert(0, (self.first_attempt_status, {}))
        if self.stall is not None:
            return await self.silent(request, self.stall)
        if self.script:
            status, headers = self.script.pop(0)
            error = {"error": {"message": f"status {status}"}}
            return web.json_response(error, status=status, headers=headers)
        message = self.answers.pop(0) if self.answers else {"role": "assistant", "content": "done"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return web.json_response({"model": "m", "choices": [choice], "usage": {"completion_tokens": 1}})

    async def silent(self, request: web.Request, kind: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": kind})
        await response.prepare(request)
        if kind == "text/event-stream":
            await response.write(b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n')
        # Until the client hangs up (the handler is cancelled then), or 15 s for a client that never would; not
        # asyncio.sleep, which tests replace.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 15)
        return response

    async def handle_responses(self, request: web.Request) -> web.Response:
        self.requests.append((dict(request.headers), await request.json()))
        message = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done"}],
        }
        body = {"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": [message]}
        return web.json_response({**body, "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}})


@pytest.fixture
async def served() -> AsyncIterator[tuple[Server, str]]:
    server = Server([], [])
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    app.router.add_post("/v1/responses", server.handle_responses)
    runner, _site, url = await listen(app, "127.0.0.1", 0)
    yield server, url + "/v1"  # the API base: the driver adds chat/completions
    await runner.cleanup()


async def sender_for(url: str, session: aiohttp.ClientSession, **cfg: Any) -> Sender:
    config = RecordConfig(stream=False, backoff_base=1.0, backoff_max=8.0, **cfg)
    return Sender(session, url, "run-1", config, auth="sk-x", rng=random.Random(0))


@pytest.fixture
def backoff_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The driver's backoff sleeps, recorded instead of slept."""
    waits: list[float] = []

    async def no_sleep(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(conversation.asyncio, "sleep", no_sleep)
    return waits


async def test_retries_wait_as_the_server_asks_and_stop_at_max_retries(
    served: tuple[Server, str], backoff_waits: list[float]
) -> None:
    server, url = served
    waits = backoff_waits
    server.script = [(429, {"retry-after-ms": "20000"}), (503, {}), (400, {})]
    async with aiohttp.ClientSession() as session:
        sender = await sender_for(url, session, max_retries=5)
        result, attempts = await send_with_retries(sender, Job(make_spec(), "m", 1), 0, [{"role": "user"}])
        assert (result.kind, result.status, attempts) == ("http_error", 400, 3)  # a 400 is final
        assert waits[0] == 20.0 and 1.0 <= waits[1] <= 2.0 and len(waits) == 2
        sent = [h for h, _ in server.requests]
        assert [h["X-Bench-Attempt"] for h in sent] == ["1", "2", "3"]
        assert {h["X-Bench-Epoch"] for h in sent} == {"1"} and {h["Authorization"] for h in sent} == {"Bearer sk-x"}
        assert len({json.dumps(b, sort_keys=True) for _, b in server.requests}) == 1  # the same body each time

        server.requests.clear()
        server.script = [(500, {})] * 5
        sender = await sender_for(url, session, max_retries=2)
        result, attempts = await send_with_retries(sender, Job(make_spec(), "m", 0), 0, [])
        assert (result.status, attempts, len(server.requests)) == (500, 3, 3)  # 1 + max_retries


async def test_tool_loop_without_a_workspace_answers_no_runner(served: tuple[Server, str]) -> None:
    server, url = served
    call = {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    server.answers = [{"role": "assistant", "content": None, "tool_calls": [call]}] * 5
    test = make_spec(limits=Limits(max_turns=3), tools=TOOLS)
    async with aiohttp.ClientSession() as session:
        result = await run_job(await sender_for(url, session), Job(test, "m", 0))
    assert (result.ok, result.requests, result.retries, result.turns) == (True, 3, 0, 3)
    last = server.requests[-1][1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool"]
    assert last[2] == {"role": "tool", "tool_call_id": "c1", "content": NO_RUNNER}
    assert [h["X-Bench-Turn"] for h, _ in server.requests] == ["0", "1", "2"]


async def test_a_failed_turn_ends_the_job_with_its_error(served: tuple[Server, str]) -> None:
    server, url = served
    server.script = [(404, {})]
    async with aiohttp.ClientSession() as session:
        result = await run_job(await sender_for(url, session, max_retries=3), Job(make_spec(), "m", 0))
    assert (result.ok, result.requests, result.turns) == (False, 1, 1) and result.error == "status 404"


async def test_workspace_tools_answer_each_call_until_the_call_limit(served: tuple[Server, str]) -> None:
    # One call per turn; max_calls=3 ends the job at the turn whose call would be the third, unrun.
    server, url = served

    def one_call(name: str, arguments: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        if call_id is not None:
            call["id"] = call_id
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    server.answers = [
        one_call("read_file", {"path": "README.md"}, None),  # no id: the driver names it by turn and index
        one_call("run_command", {"command": "ls"}, "c2"),  # a built-in tool this test does not offer
        one_call("list_dir", {"path": "."}, "c3"),
    ]
    workspace = Workspace(fixture="minilib", tools=("read_file", "list_dir"))
    test = replace(make_spec(limits=Limits(max_turns=5, max_calls=3)), workspace=workspace)
    job = Job(test, "m", 0)
    async with aiohttp.ClientSession() as session:
        result = await run_job(await sender_for(url, session), job)
    assert result.job is job
    assert (result.ok, result.requests, result.retries, result.turns) == (True, 3, 0, 3)
    last = server.requests[-1][1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool"]
    assert [c["id"] for c in last[1]["tool_calls"]] == ["call_t0_0"] and last[2]["tool_call_id"] == "call_t0_0"
    readme = (fixture_dir("minilib") / "README.md").read_text()
    assert readme.splitlines()[0] in last[2]["content"]
    assert last[4]["tool_call_id"] == "c2" and "unknown tool 'run_command'" in last[4]["content"]


async def test_every_request_carries_the_runs_tags_and_the_key(served: tuple[Server, str]) -> None:
    # The proxy files each exchange under these tags (docs/record.md); the names and values are a contract.
    server, url = served
    job = Job(make_spec(), "m-1", 2)
    want = {
        "Content-Type": "application/json",
        "X-Bench-Run": "run-1",
        "X-Bench-Test": "s.t",
        "X-Bench-Model": "m-1",
        "X-Bench-Epoch": "2",
        "X-Bench-Turn": "1",
        "X-Bench-Attempt": "3",
        "Authorization": "Bearer sk-x",
    }
    async with aiohttp.ClientSession() as session:
        sender = await sender_for(url, session)
        assert sender.headers(job, 1, 3) == want
        result, attempts = await send_with_retries(sender, job, 1, [{"role": "user", "content": "hi"}])
    assert (result.ok, attempts) == (True, 1)
    sent = server.requests[0][0]
    assert {k: sent[k] for k in want} == {**want, "X-Bench-Attempt": "1"}


async def test_a_test_that_allows_a_command_gets_it_run_and_others_refused(served: tuple[Server, str]) -> None:
    # The catalog's allow-list reaches the workspace: the allowed program runs (its output comes back to the model),
    # another is refused with the list the test gave.
    server, url = served
    run = {"name": "run_command", "arguments": json.dumps({"command": ["python3", "-c", "print(6 * 7)"]})}
    other = {"name": "run_command", "arguments": json.dumps({"command": ["ls"]})}
    server.answers = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": run}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": other}]},
    ]
    workspace = Workspace(fixture="minilib", tools=("run_command",), allow_commands=("python3",))
    test = replace(make_spec(limits=Limits(max_turns=3)), workspace=workspace)
    async with aiohttp.ClientSession() as session:
        result = await run_job(await sender_for(url, session), Job(test, "m", 0))
    assert (result.ok, result.turns) == (True, 3)
    last = server.requests[-1][1]["messages"]
    assert last[2] == {"role": "tool", "tool_call_id": "c1", "content": "exit status 0\n42\n"}
    assert last[4]["tool_call_id"] == "c2" and "command not allowed: 'ls' (allowed: python3)" in last[4]["content"]


async def test_a_retry_after_past_retry_after_max_waits_the_cap_and_says_so_once(
    served: tuple[Server, str], backoff_waits: list[float]
) -> None:
    # Retry-After: 45 twice, then an answer: each wait is the default cap (30 s), and one line names the cap.
    server, url = served
    server.script = [(429, {"Retry-After": "45"}), (503, {"Retry-After": "45"})]
    said: list[str] = []
    async with aiohttp.ClientSession() as session:
        sender = await sender_for(url, session, max_retries=5)
        sender.say = said.append
        result, attempts = await send_with_retries(sender, Job(make_spec(), "m", 0), 0, [{"role": "user"}])
    assert (result.kind, attempts) == ("ok", 3)
    assert backoff_waits == [30.0, 30.0]
    assert said == [
        "bench record: m: the server asked to wait 45 s before retrying (Retry-After); waiting retry_after_max 30 s "
        "instead (set retry_after_max in bench.yaml to wait longer)"
    ]


async def test_retries_of_every_turn_are_counted(served: tuple[Server, str], backoff_waits: list[float]) -> None:
    # A 503 before each of two turns' answers: four requests, two of them retries (one per turn), two turns.
    server, url = served
    call = {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    server.answers = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    server.first_attempt_status = 503
    test = make_spec(limits=Limits(max_turns=2), tools=TOOLS)
    async with aiohttp.ClientSession() as session:
        result = await run_job(await sender_for(url, session, max_retries=3), Job(test, "m", 0))
    assert (result.ok, result.requests, result.retries, result.turns) == (True, 4, 2, 2)
    assert [(h["X-Bench-Turn"], h["X-Bench-Attempt"]) for h, _ in server.requests] == [
        ("0", "1"),
        ("0", "2"),
        ("1", "1"),
        ("1", "2"),
    ]


async def test_a_test_set_to_the_responses_api_is_sent_there_translated_and_read_as_such(
    served: tuple[Server, str],
) -> None:
    # `test_api` sends one test to the Responses API (its messages as `input`) while the others stay on Chat
    # Completions; the answer is read as a Responses body.
    server, url = served
    async with aiohttp.ClientSession() as session:
        sender = await sender_for(url, session, api="chat", test_api={"s.t": "responses"})
        result, attempts = await send_with_retries(
            sender, Job(make_spec(), "m", 0), 0, [{"role": "user", "content": "hi"}]
        )
        other = replace(make_spec(), id="s.other")
        chat, _ = await send_with_retries(sender, Job(other, "m", 0), 0, [{"role": "user", "content": "hi"}])
    assert (result.ok, attempts) == (True, 1) and result.parsed is not None and result.parsed.content == "done"
    assert chat.ok and chat.parsed is not None and chat.parsed.content == "done"
    [(headers, body), (_, chat_body)] = server.requests
    assert headers["X-Bench-Test"] == "s.t" and "messages" not in body
    assert body["input"] == [{"role": "user", "content": "hi"}] and body["model"] == "m"
    assert chat_body["messages"] == [{"role": "user", "content": "hi"}] and "input" not in chat_body


async def test_a_models_own_timeout_ends_an_attempt_and_timeouts_are_retried_only_when_asked(
    served: tuple[Server, str], backoff_waits: list[float]
) -> None:
    # The server answers nothing; the model's entry in model_timeouts (not the 10 s request_timeout) ends each
    # attempt. A timeout is final unless retry_timeouts says otherwise.
    server, url = served
    server.stall = "application/json"
    job = Job(make_spec(), "slow", 0)
    async with aiohttp.ClientSession() as session:
        for retry, want in ((False, 1), (True, 3)):
            server.requests.clear()
            sender = await sender_for(
                url, session, max_retries=2, retry_timeouts=retry, request_timeout=10.0, model_timeouts={"slow": 0.2}
            )
            result, attempts = await send_with_retries(sender, job, 0, [{"role": "user", "content": "hi"}])
            assert (result.kind, attempts, len(server.requests)) == ("timeout", want, want), retry
            assert result.error == "no complete answer within 0.2 s (request_timeout)"


async def test_a_stream_that_goes_silent_ends_at_the_idle_timeout(served: tuple[Server, str]) -> None:
    # One event, then nothing: the idle limit ends the attempt long before the request's.
    server, url = served
    server.stall = "text/event-stream"
    async with aiohttp.ClientSession() as session:
        sender = await sender_for(url, session, max_retries=0, request_timeout=30.0, idle_timeout=0.2)
        sender.cfg.stream = True
        result, attempts = await send_with_retries(sender, Job(make_spec(), "m", 0), 0, [{"role": "user"}])
    assert (result.kind, attempts) == ("timeout", 1)
    assert result.error == "stream silent for 0.2 s (idle_timeout)"
    assert server.requests[0][1]["stream"] is True


async def test_a_request_that_asked_for_no_stream_has_no_idle_limit(served: tuple[Server, str]) -> None:
    # idle_timeout is for streams the driver asked for; a server that streams anyway and goes silent is waited for
    # until the request's own limit.
    server, url = served
    server.stall = "text/event-stream"
    async with aiohttp.ClientSession() as session:
        sender = await sender_for(url, session, max_retries=0, request_timeout=1.0, idle_timeout=0.1)
        result, _ = await send_with_retries(sender, Job(make_spec(), "m", 0), 0, [{"role": "user"}])
    assert "stream" not in server.requests[0][1]
    assert (result.kind, result.error) == ("timeout", "no complete answer within 1 s (request_timeout)")


async def test_backoff_jitter_comes_from_the_senders_random_source(
    served: tuple[Server, str], backoff_waits: list[float]
) -> None:
    # Sender.rng is where the jitter comes from: two runs given the same seed wait alike, each wait within the
    # documented range (half of base * 2^(n-1) fixed, half random, capped at backoff_max).
    server, url = served
    waits = backoff_waits
    runs = []
    async with aiohttp.ClientSession() as session:
        for _ in range(2):
            waits.clear()
            server.script = [(500, {})] * 5
            sender = await sender_for(url, session, max_retries=5)  # base 1, cap 8, Random(0)
            result, attempts = await send_with_retries(sender, Job(make_spec(), "m", 0), 0, [])
            assert (result.ok, attempts) == (True, 6)
            runs.append(list(waits))
    assert runs[0] == runs[1]
    for n, wait in enumerate(runs[0], start=1):
        step = min(8.0, 2.0 ** (n - 1))
        assert step / 2 <= wait <= step, (n, wait)
    assert len(set(runs[0])) == 5


async def test_on_attempt_sees_every_attempts_result_in_order(
    served: tuple[Server, str], backoff_waits: list[float]
) -> None:
    server, url = served
    server.script = [(503, {}), (429, {})]
    seen: list[AttemptResult] = []
    async with aiohttp.ClientSession() as session:
        sender = await sender_for(url, session, max_retries=3)
        sender.on_attempt = seen.append
        result, attempts = await send_with_retries(sender, Job(make_spec(), "m", 0), 0, [])
    assert attempts == 3 and [(r.kind, r.status) for r in seen] == [
        ("http_error", 503),
        ("http_error", 429),
        ("ok", 200),
    ]
    assert seen[-1] is result
