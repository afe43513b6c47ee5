"""A real OpenAI-like server on loopback for tests: deterministic bytes, precise pacing, failures on request.

    upstream = await start_upstream()          # or: async with await start_upstream() as upstream
    client = AsyncOpenAI(base_url=upstream.base_url, api_key="sk-test")
    ...
    upstream.requests                          # every request it received (headers, body, disconnected...)
    await upstream.close()

Routes: POST /v1/chat/completions (streamed or not; with `tools` it answers with a tool call whose arguments are
streamed in fragments), POST /v1/completions, POST /v1/embeddings, GET /v1/models; anything else is an OpenAI-shaped
404. Everything it sends depends only on the request body, so the same request gives the same bytes.

The request's `model` picks a behaviour:
  test-429       429 with Retry-After: 1            test-500    500 with an OpenAI error body
  test-drop      streams a few chunks, then cuts the connection without ending the body
  test-stall     sends headers and the role chunk, then goes silent for `x_stall_s` seconds (default 30)
  test-slow-headers  waits `x_stall_s` seconds before answering at all
  test-no-done   a stream that ends cleanly but without finish_reason and without [DONE]
  test-count     another answer each time the same request comes again
Extra body fields tune a stream: `x_ttft_ms` (delay before the first chunk, default start_upstream's ttft),
`x_delay_ms` (between chunks), `x_words` (content chunks), `x_end_delay_ms` (pause between the last event and the
end of the body), `x_hold` (a name: the stream waits before the end of its body until the test calls
`upstream.release(name)`, so it is in flight for exactly as long as the test needs), `x_echo_auth` (echo
Authorization in a header and the text, to test that the proxy scrubs it; `"tokens"`: in the text only, three
characters an event, as a model echoing a key token by token).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

CREATED = 1_700_000_000
SYSTEM_FINGERPRINT = "fp_bench_upstream"
SERVER = "bench-test-upstream/1"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wise",
    "owls",
    "count",
    "stars",
    "above",
    "quiet",
    "hills",
    "and",
    "rivers",
    "carry",
    "old",
    "songs",
    "toward",
    "the",
    "patient",
    "sea",
]
TOOL_ARGUMENTS = '{"city": "Paris", "unit": "celsius", "days": 3}'


@dataclass
class LoggedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    json: Any
    disconnected: bool = False  # the client (or the proxy) went away before the response ended
    finished: bool = False


@dataclass
class Upstream:
    url: str  # http://127.0.0.1:PORT
    requests: list[LoggedRequest] = field(default_factory=list)
    runner: web.AppRunner | None = None
    holds: dict[str, asyncio.Event] = field(default_factory=dict)

    def hold(self, name: str) -> asyncio.Event:
        return self.holds.setdefault(name, asyncio.Event())

    def release(self, name: str) -> None:
        """Let the streams sent with `x_hold: name` end (those to come do not wait)."""
        self.hold(name).set()

    @property
    def base_url(self) -> str:
        """What an OpenAI SDK takes as base_url."""
        return f"{self.url}/v1"

    async def close(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Upstream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def start_upstream(
    *, host: str = "127.0.0.1", port: int = 0, ttft: float = 0.005, delay: float = 0.002, words: int = 12
) -> Upstream:
    """Start the server; `ttft`/`delay` (seconds) and `words` are the stream defaults a request can override."""
    upstream = Upstream(url="")
    app = web.Application()
    app[UPSTREAM] = upstream
    app[DEFAULTS] = {"ttft": ttft, "delay": delay, "words": words}
    app.router.add_route("*", "/{tail:.*}", _handle)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    upstream.runner = runner
    upstream.url = f"http://{host}:{runner.addresses[0][1]}"
    return upstream


@contextmanager
def upstream_thread(**kwargs: Any) -> Iterator[Upstream]:
    """The same server on its own event loop thread, for callers that block their own (pytester, sync clients)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-upstream", daemon=True)
    thread.start()
    try:
        upstream = asyncio.run_coroutine_threadsafe(start_upstream(**kwargs), loop).result(30)
        try:
            yield upstream
        finally:
            asyncio.run_coroutine_threadsafe(upstream.close(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:24]


def _headers(seed: str) -> dict[str, str]:
    return {"x-request-id": f"req_{seed}", "openai-processing-ms": "3", "Server": SERVER}


def _error(status: int, message: str, type_: str, code: str | None, **headers: str) -> web.Response:
    body = json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})
    return web.Response(
        status=status, text=body, content_type="application/json", headers={"Server": SERVER, **headers}
    )


async def _handle(request: web.Request) -> web.StreamResponse:
    upstream: Upstream = request.app[UPSTREAM]
    body = await request.read()
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        doc = None
    log = LoggedRequest(
        request.method, request.path, request.query_string, dict(request.headers), body, doc if doc != {} else None
    )
    upstream.requests.append(log)
    try:
        response = await _route(request, log, doc if isinstance(doc, dict) else {})
        log.finished = True
        return response
    except (asyncio.CancelledError, ConnectionError):
        log.disconnected = True
        raise


async def _route(request: web.Request, log: LoggedRequest, doc: dict[str, Any]) -> web.StreamResponse:
    path = request.path.rstrip("/")
    if path == "/v1/models" and request.method == "GET":
        data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "bench"} for m in ("test-model", "test-2")]
        return web.json_response({"object": "list", "data": data}, headers=_headers("models"))
    if request.method != "POST" or path not in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings"):
        return _error(404, f"no route {request.method} {request.path}", "invalid_request_error", "unknown_url")
    model = str(doc.get("model", "test-model"))
    defaults = request.app[DEFAULTS]
    stall = float(doc.get("x_stall_s", 30))
    if model == "test-429":
        return _error(
            429, "Rate limit reached; try again in 1s", "requests", "rate_limit_exceeded", **{"Retry-After": "1"}
        )
    if model == "test-500":
        return _error(500, "The server had an error while processing your request", "server_error", None)
    if model == "test-slow-headers":
        await asyncio.sleep(stall)
    seed = _digest(log.body)
    if model == "test-count":
        # The same request gets another answer each time: replaying repeats in recorded order is then visible.
        asked = sum(1 for r in request.app[UPSTREAM].requests if r.body == log.body)
        seed = _digest(log.body + str(asked).encode())
    headers = _headers(seed)
    if doc.get("x_echo_auth") and doc.get("x_echo_auth") != "tokens":
        headers["x-echo-authorization"] = request.headers.get("Authorization", "")
    if path == "/v1/embeddings":
        return web.json_response(_embeddings(doc, seed), headers=headers)
    plan = _Plan(doc, seed, defaults, request.headers.get("Authorization", "") if doc.get("x_echo_auth") else "")
    if not doc.get("stream"):
        await asyncio.sleep(plan.ttft)
        return web.json_response(plan.whole(chat=path.endswith("chat/completions")), headers=headers)
    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    chunks = plan.chunks(chat=path.endswith("chat/completions"))
    loop = asyncio.get_running_loop()
    start = loop.time() + plan.ttft
    for i, chunk in enumerate(chunks):
        # Absolute schedule: sleeping a fixed delay after each write would drift by the write times.
        wait = start + i * plan.delay - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        await response.write(chunk)
        if model == "test-stall" and i == 0:
            await asyncio.sleep(stall)
        if model == "test-drop" and i == 3:
            assert request.transport is not None
            request.transport.close()
            return response
    if doc.get("x_end_delay_ms"):
        await asyncio.sleep(float(doc["x_end_delay_ms"]) / 1000)
    if doc.get("x_hold"):
        await request.app[UPSTREAM].hold(str(doc["x_hold"])).wait()
    await response.write_eof()
    return response


UPSTREAM = web.AppKey("upstream", Upstream)
DEFAULTS = web.AppKey("defaults", dict[str, Any])


class _Plan:
    def __init__(self, doc: dict[str, Any], seed: str, defaults: dict[str, Any], echo: str) -> None:
        self.doc = doc
        self.seed = seed
        self.model = str(doc.get("model", "test-model"))
        self.ttft = float(doc.get("x_ttft_ms", defaults["ttft"] * 1000)) / 1000
        self.delay = float(doc.get("x_delay_ms", defaults["delay"] * 1000)) / 1000
        n = int(doc.get("x_words", defaults["words"]))
        start = int(seed[:4], 16) % len(WORDS)
        self.words = [WORDS[(start + i) % len(WORDS)] for i in range(n)]
        self.pieces = [w if i == 0 else " " + w for i, w in enumerate(self.words)]  # one content event each
        if echo and doc.get("x_echo_auth") == "tokens":
            said = f" your key is {echo.removeprefix('Bearer ')}."
            self.pieces += [said[i : i + 3] for i in range(0, len(said), 3)]
            self.words.append(said.strip())
        elif echo:
            self.words.append(f"(you sent {echo})")
            self.pieces.append(" " + self.words[-1])
        tools = doc.get("tools") or []
        self.tool = tools[0]["function"]["name"] if tools and doc.get("tool_choice") != "none" else None
        self.include_usage = bool((doc.get("stream_options") or {}).get("include_usage"))

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def usage(self) -> dict[str, int]:
        completion = len(self.words) + (8 if self.tool else 0)
        return {"prompt_tokens": 17, "completion_tokens": completion, "total_tokens": 17 + completion}

    def whole(self, *, chat: bool) -> dict[str, Any]:
        finish = "tool_calls" if self.tool else "stop"
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": None if self.tool else self.text}
            if self.tool:
                message["tool_calls"] = [
                    {
                        "id": f"call_{self.seed[:12]}",
                        "type": "function",
                        "function": {"name": self.tool, "arguments": TOOL_ARGUMENTS},
                    }
                ]
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": self.text, "logprobs": None, "finish_reason": "stop"}
            kind = "text_completion"
        return {
            "id": f"chatcmpl-{self.seed}",
            "object": kind,
            "created": CREATED,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [choice],
            "usage": self.usage(),
        }

    def _event(self, choices: list[dict[str, Any]], chat: bool, **extra: Any) -> bytes:
        obj = {
            "id": f"chatcmpl-{self.seed}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": CREATED,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
            **extra,
        }
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    def chunks(self, *, chat: bool) -> list[bytes]:
        no_done = self.model == "test-no-done"
        out: list[bytes] = []
        if not chat:
            out.extend(self._event([{"index": 0, "text": w + " ", "finish_reason": None}], chat) for w in self.words)
            if not no_done:
                out.append(self._event([{"index": 0, "text": "", "finish_reason": "stop"}], chat))
                out.append(b"data: [DONE]\n\n")
            return out

        def delta(d: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}]

        out.append(self._event(delta({"role": "assistant", "content": ""}), chat))
        if self.tool:
            call = {"index": 0, "id": f"call_{self.seed[:12]}", "type": "function"}
            out.append(
                self._event(delta({"tool_calls": [{**call, "function": {"name": self.tool, "arguments": ""}}]}), chat)
            )
            for i in range(0, len(TOOL_ARGUMENTS), 7):
                fragment = {"index": 0, "function": {"arguments": TOOL_ARGUMENTS[i : i + 7]}}
                out.append(self._event(delta({"tool_calls": [fragment]}), chat))
        else:
            for piece in self.pieces:
                out.append(self._event(delta({"content": piece}), chat))
        if no_done:
            return out
        out.append(self._event(delta({}, "tool_calls" if self.tool else "stop"), chat))
        if self.include_usage:
            out.append(self._event([], chat, usage=self.usage()))
        out.append(b"data: [DONE]\n\n")
        return out


def _embeddings(doc: dict[str, Any], seed: str) -> dict[str, Any]:
    inputs = doc.get("input", "")
    items = inputs if isinstance(inputs, list) else [inputs]
    data = []
    for i, item in enumerate(items):
        h = hashlib.sha256(f"{seed}:{i}:{item}".encode()).digest()
        data.append({"object": "embedding", "index": i, "embedding": [round((b - 128) / 128, 6) for b in h[:16]]})
    return {
        "object": "list",
        "data": data,
        "model": doc.get("model", "test-embed"),
        "usage": {"prompt_tokens": 4, "total_tokens": 4},
    }
