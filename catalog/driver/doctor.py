"""`bench doctor`: probe a gateway for what recording relies on, printed as a checklist."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from bench.catalog.driver.client import OK, post_chat
from bench.catalog.driver.preflight import PROBE_TIMEOUT, api_base, auth_headers, list_models
from bench.catalog.driver.server_info import read_server, summary
from bench.core.errors import BenchError

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    # A failed optional check is a warning: recording works, some figures will be missing.
    required: bool = True


async def diagnose(upstream: str, api_key: str | None, model: str | None) -> list[Check]:
    checks: list[Check] = []
    base = api_base(upstream)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT), trust_env=False) as session:
        try:
            served = await list_models(session, base, api_key)
        except BenchError as exc:
            return [Check("models list", False, str(exc))]
        if served is None:
            checks.append(Check("models list", False, "no usable /v1/models (gateway may not list models)", False))
        else:
            checks.append(Check("models list", True, f"{len(served)} models: {', '.join(served[:5])}"))
        info = await read_server(upstream, api_key, [model] if model else [])
        checks.append(Check("server", info.engine is not None, "; ".join(summary(info)), False))
        model = model or (served[0] if served else None)
        if model is None:
            checks.append(Check("streaming call", False, "no model to try; pass --model"))
            return checks
        probe = _Probe(
            session, f"{base}/v1/chat/completions", {"Content-Type": "application/json", **auth_headers(api_key)}
        )
        checks.extend(await _streaming_checks(probe, model))
        checks.append(await _tool_check(probe, model))
    return checks


@dataclass(frozen=True)
class _Probe:
    session: aiohttp.ClientSession
    url: str
    headers: dict[str, str]

    async def send(self, body: dict[str, Any]) -> Any:
        data = orjson.dumps(body)
        return await post_chat(self.session, self.url, data, self.headers, timeout=PROBE_TIMEOUT, idle_timeout=30.0)


async def _streaming_checks(probe: _Probe, model: str) -> list[Check]:
    """A short streamed answer: does it stream, with usage and a system fingerprint?"""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello in five words."}],
        "max_tokens": 32,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.monotonic()
    res = await probe.send(body)
    parsed = res.parsed
    if res.kind != OK or parsed is None:
        return [Check("streaming call", False, f"{model}: {res.kind} {res.error or ''}".strip())]
    ttft = parsed.timing.ttft_us
    took = f"{parsed.timing.n_events} events, TTFT {(ttft or 0) / 1000:.0f} ms, {time.monotonic() - t0:.2f} s total"
    usage = parsed.usage
    said = f"completion_tokens={usage.get('completion_tokens')}" if usage else ""
    said = said or "no usage chunk with stream_options.include_usage: token counts will be estimated"
    fp = parsed.system_fingerprint
    return [
        Check("streaming call", True, f"{model}: {took}"),
        Check("usage in streams", usage is not None, said, False),
        Check("system_fingerprint", fp is not None, fp or "not sent: backend changes go unnoticed", False),
    ]


async def _tool_check(probe: _Probe, model: str) -> Check:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
        "tools": [WEATHER_TOOL],
        "max_tokens": 128,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    res = await probe.send(body)
    calls = res.parsed.tool_calls if res.parsed is not None else []
    if res.kind != OK:
        return Check("tool call", False, f"{res.kind} {res.error or ''}".strip())
    if not calls:
        return Check("tool call", False, "the model answered without calling the tool", False)
    c = calls[0]
    detail = f"{c.name}({c.arguments})" + ("" if c.valid_json else " - arguments are not valid JSON")
    return Check("tool call", c.valid_json, detail, False)


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        mark = "[ok]" if c.ok else ("[FAIL]" if c.required else "[warn]")
        lines.append(f"{mark:7}{c.name}: {c.detail}")
    return "\n".join(lines)
