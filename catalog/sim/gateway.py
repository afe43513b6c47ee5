"""The simulator's aiohttp app and its in-process handle (`start_sim`)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from bench.catalog.model import Catalog, load_catalog
from bench.catalog.sim.behaviours import BEHAVIOURS
from bench.catalog.sim.catalog_index import CatalogIndex
from bench.catalog.sim.fault_plan import Fault, FaultPlan, request_key, split_model
from bench.catalog.sim.legacy import (
    embedding_inputs,
    encode_completion_body,
    encode_completion_stream,
    encode_embeddings,
)
from bench.catalog.sim.reply import Reply, SimRequest
from bench.catalog.sim.responses import encode_response_body, encode_response_stream
from bench.catalog.sim.stream import (
    Meta,
    count_prompt_tokens,
    encode_body,
    encode_stream,
    error_body,
    forced_length,
    limit_reply,
    pad_reply,
)
from bench.core.errors import BenchError
from bench.core.responses_request import chat_from_responses
from bench.core.serving import listen

CHAT_API = "chat"
RESPONSES_API = "responses"
COMPLETIONS_API = "completions"

# A stall without a duration lasts until the client gives up.
FOREVER = 3600.0


@dataclass
class SimStats:
    """What the sim saw, for tests and benchmarks: concurrency per model, faults served, arrival times."""

    requests: Counter[str] = field(default_factory=Counter)
    in_flight: Counter[str] = field(default_factory=Counter)
    max_in_flight: Counter[str] = field(default_factory=Counter)
    max_in_flight_total: int = 0
    # With --max-concurrency: requests being answered at once (the others wait for a slot), and the most there were.
    answering: int = 0
    max_answering: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    # (monotonic seconds, model, request key, fault kind or None) per chat request.
    log: list[tuple[float, str, str, str | None]] = field(default_factory=list)

    def enter(self, model: str) -> None:
        self.requests[model] += 1
        self.in_flight[model] += 1
        self.max_in_flight[model] = max(self.max_in_flight[model], self.in_flight[model])
        self.max_in_flight_total = max(self.max_in_flight_total, sum(self.in_flight.values()))

    def leave(self, model: str) -> None:
        self.in_flight[model] -= 1


def _json_error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=error_body(status, message), content_type="application/json", headers=headers
    )


def _whole_body(api: str, reply: Reply, meta: Meta, prompt_tokens: int, completion_tokens: int, empty: bool) -> bytes:
    """A non-streamed answer's body in `api`'s shape; `empty` (the fault) gives it no output."""
    if api == RESPONSES_API:
        return encode_response_body(Reply() if empty else reply, meta, prompt_tokens, completion_tokens)
    if api == COMPLETIONS_API:
        data = encode_completion_body(reply, meta, prompt_tokens, completion_tokens)
    else:
        data = encode_body(reply, meta, prompt_tokens, completion_tokens)
    if empty:
        doc = orjson.loads(data)
        doc["choices"] = []
        data = orjson.dumps(doc)
    return data


class Simulator:
    def __init__(
        self,
        *,
        ttft_ms: float,
        tokens_per_second: float,
        catalog: Catalog | None,
        api_key: str | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        self.ttft = max(0.0, ttft_ms) / 1000.0
        # A server's slots: requests beyond them wait in line (their TTFT grows), as a batch-limited server's do.
        self.slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        self.tps = max(0.0, tokens_per_second)
        self.index = CatalogIndex(catalog)
        self.api_key = api_key
        self.plan = FaultPlan()
        self.stats = SimStats()
        self._ids = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_get("/health", self.health)
        return app

    def _authorised(self, request: web.Request) -> bool:
        return self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}"

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "tests": len(self.index)})

    async def models(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return _json_error(401, "Incorrect API key provided (bench sim)")
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "bench-sim"} for name in sorted(BEHAVIOURS)]
        return web.Response(body=orjson.dumps({"object": "list", "data": data}), content_type="application/json")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, CHAT_API)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, RESPONSES_API)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, COMPLETIONS_API)

    async def _read(self, request: web.Request) -> dict[str, Any] | web.Response:
        if not self._authorised(request):
            return _json_error(401, "Incorrect API key provided (bench sim)")
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _json_error(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return _json_error(400, "request needs a JSON object with a 'model' string")
        return body

    def _fault(self, request: web.Request, body: dict[str, Any]) -> tuple[str, Fault | None] | web.Response:
        model = body["model"]
        try:
            base, faults = split_model(model)
            fault = self.plan.choose(faults, request_key(model, body), request.headers.get("X-Sim-Fault"))
        except BenchError as exc:
            return _json_error(400, str(exc))
        if base not in BEHAVIOURS:
            msg = f"The model '{model}' does not exist (bench sim models: {', '.join(sorted(BEHAVIOURS))})"
            return _json_error(404, msg)
        return base, fault

    async def _generate(self, request: web.Request, api: str) -> web.StreamResponse:
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        if api == RESPONSES_API:
            if not isinstance(body.get("input"), str | list):
                return _json_error(400, "'input' must be a string or a list of input items")
            chat_body = chat_from_responses(body)
        elif api == COMPLETIONS_API:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                return _json_error(400, "'prompt' must be a string (bench sim)")
            chat_body = {**body, "messages": [{"role": "user", "content": prompt}]}
        else:
            chat_body = body
        messages = chat_body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return _json_error(400, "'messages' must be a list of message objects")
        chosen = self._fault(request, body)
        if isinstance(chosen, web.Response):
            return chosen
        base, fault = chosen
        model = body["model"]
        self.stats.enter(model)
        self.stats.log.append((time.monotonic(), model, request_key(model, body), fault.kind if fault else None))
        if fault is not None:
            self.stats.faults[fault.kind] += 1
        try:
            if self.slots is None:
                return await self._answer(request, chat_body, model, base, messages, fault, api)
            async with self.slots:
                self.stats.answering += 1
                self.stats.max_answering = max(self.stats.max_answering, self.stats.answering)
                try:
                    return await self._answer(request, chat_body, model, base, messages, fault, api)
                finally:
                    self.stats.answering -= 1
        finally:
            self.stats.leave(model)

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        texts = embedding_inputs(body)
        if texts is None:
            return _json_error(400, "'input' must be a string, a list of strings or token lists")
        chosen = self._fault(request, body)
        if isinstance(chosen, web.Response):
            return chosen
        _base, fault = chosen
        model = body["model"]
        self.stats.enter(model)
        try:
            await asyncio.sleep(self.ttft)
            if fault is not None and fault.status is not None:
                self.stats.faults[fault.kind] += 1
                headers = {"Retry-After": str(int(fault.param if fault.param is not None else 1))}
                return _json_error(fault.status, f"simulated {fault.kind} (bench sim fault)", headers)
            return web.Response(body=encode_embeddings(texts, model), content_type="application/json")
        finally:
            self.stats.leave(model)

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        model: str,
        base: str,
        messages: list[dict[str, Any]],
        fault: Fault | None,
        api: str = CHAT_API,
    ) -> web.StreamResponse:
        if fault is not None and fault.status is not None:
            await asyncio.sleep(self.ttft)
            headers = {"Retry-After": str(int(fault.param if fault.param is not None else 1))}
            return _json_error(fault.status, f"simulated {fault.kind} (bench sim fault)", headers)
        test, turn = self.index.find(messages)
        tools = body.get("tools") or []
        req = SimRequest(model=model, body=body, messages=messages, tools=tools, test=test, turn=turn)
        reply = BEHAVIOURS[base](req)
        forced = forced_length(body)
        if forced is not None:
            reply = pad_reply(reply, forced)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        reply, completion_tokens = limit_reply(reply, max_tokens if isinstance(max_tokens, int) else None)
        prefix = {CHAT_API: "chatcmpl", RESPONSES_API: "resp", COMPLETIONS_API: "cmpl"}[api]
        meta = Meta(id=f"{prefix}-sim{next(self._ids):08d}", created=int(time.time()), model=model)
        prompt_tokens = count_prompt_tokens(body)
        empty = fault is not None and fault.kind == "empty"
        if not body.get("stream"):
            await asyncio.sleep(self.ttft + (completion_tokens / self.tps if self.tps else 0.0))
            data = _whole_body(api, reply, meta, prompt_tokens, completion_tokens, empty)
            if fault is not None and fault.kind == "stall":
                await asyncio.sleep(fault.param or FOREVER)
            if fault is not None and fault.kind == "truncate":
                return await self._cut_body(request, data)
            return web.Response(body=data, content_type="application/json")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if api == RESPONSES_API:
            enc = encode_response_stream(Reply() if empty else reply, meta, prompt_tokens, completion_tokens)
        elif api == COMPLETIONS_API:
            enc = encode_completion_stream(reply, meta, prompt_tokens, completion_tokens, include_usage)
        else:
            enc = encode_stream(reply, meta, prompt_tokens, completion_tokens, include_usage)
        frames, tail = enc.frames, enc.tail
        stall_at: int | None = None
        if fault is not None:
            if fault.kind == "truncate":
                frames, tail = frames[: max(2, len(frames) // 2)], []
            elif fault.kind == "empty" and api != RESPONSES_API:
                frames = []
            elif fault.kind == "stall":
                stall_at = max(1, len(frames) // 2)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            await self._send(resp, frames, tail, stall_at, fault)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client went away: nothing left to say
        return resp

    async def _send(
        self,
        resp: web.StreamResponse,
        frames: list[bytes],
        tail: list[bytes],
        stall_at: int | None,
        fault: Fault | None,
    ) -> None:
        if not self.ttft and not self.tps and stall_at is None:
            await resp.write(b"".join(frames + tail))
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        gap = 1.0 / self.tps if self.tps else 0.0
        for i, frame in enumerate(frames):
            if i == stall_at:
                await asyncio.sleep(fault.param if fault is not None and fault.param else FOREVER)
                start = loop.time() - self.ttft - i * gap
            # Times are kept from the start so that sleep overshoot does not accumulate over a long answer.
            delay = start + self.ttft + i * gap - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await resp.write(frame)
        if tail:
            await resp.write(b"".join(tail))

    async def _cut_body(self, request: web.Request, data: bytes) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.content_length = len(data)
        await resp.prepare(request)
        await resp.write(data[: len(data) // 2])
        # The declared length is never reached: the client sees the connection end mid-body.
        if request.transport is not None:
            request.transport.close()
        return resp


class RunningSim:
    def __init__(self, sim: Simulator, runner: web.BaseRunner, url: str) -> None:
        self.sim = sim
        self.url = url
        self.base_url = url + "/v1"
        self._runner = runner

    @property
    def stats(self) -> SimStats:
        return self.sim.stats

    async def close(self) -> None:
        await self._runner.cleanup()

    async def __aenter__(self) -> RunningSim:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def default_catalog() -> Catalog | None:
    """The built-in catalog if it loads; the sim still answers generically without one."""
    try:
        catalog: Catalog = load_catalog(None, rules=None)  # it answers and never scores
    except BenchError:
        return None
    return catalog


async def start_sim(
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    ttft_ms: float = 0.0,
    tokens_per_second: float = 0.0,
    catalog: Catalog | None = None,
    api_key: str | None = None,
    max_concurrency: int | None = None,
) -> RunningSim:
    """Serve the simulator; `catalog=None` loads the built-in catalog (the oracle needs it to recognise tests)."""
    sim = Simulator(
        ttft_ms=ttft_ms,
        tokens_per_second=tokens_per_second,
        catalog=catalog if catalog is not None else default_catalog(),
        api_key=api_key,
        max_concurrency=max_concurrency,
    )
    runner, _, url = await listen(sim.app(), host, port)
    return RunningSim(sim, runner, url)
