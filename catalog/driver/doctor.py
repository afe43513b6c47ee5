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
        headers = {"Content-Type": "application/json", **auth_headers(api_key)}
        url = f"{base}/v1/chat/completions"
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": "Say hello in five words."}],
            "max_tokens": 32,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        t0 = time.monotonic()
        res = await post_chat(session, url, orjson.dumps(body), headers, timeout=PROBE_TIMEOUT, idle_timeout=30.0)
        parsed = res.parsed
        if res.kind != OK or parsed is None:
            checks.append(Check("streaming call", False, f"{model}: {res.kind} {res.error or ''}".strip()))
        else:
            ttft = parsed.timing.ttft_us
            checks.append(
                Check(
                    "streaming call",
                    True,
                    f"{model}: {parsed.timing.n_events} events, TTFT "
                    f"{(ttft or 0) / 1000:.0f} ms, {time.monotonic() - t0:.2f} s total",
                )
            )
            usage = parsed.usage
            checks.append(
                Check(
                    "usage in streams",
                    usage is not None,
                    f"completion_tokens={usage.get('completion_tokens')}"
                    if usage
                    else "no usage chunk with stream_options.include_usage: token counts will be estimated",
                    False,
                )
            )
            fp = parsed.system_fingerprint
            checks.append(
                Check("system_fingerprint", fp is not None, fp or "not sent: backend changes go unnoticed", False)
            )
        tool_body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
            "tools": [WEATHER_TOOL],
            "max_tokens": 128,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        res = await post_chat(session, url, orjson.dumps(tool_body), headers, timeout=PROBE_TIMEOUT, idle_timeout=30.0)
        calls = res.parsed.tool_calls if res.parsed is not None else []
        if res.kind != OK:
            checks.append(Check("tool call", False, f"{res.kind} {res.error or ''}".strip()))
        elif not calls:
            checks.append(Check("tool call", False, "the model answered without calling the tool", False))
        else:
            c = calls[0]
            detail = f"{c.name}({c.arguments})" + ("" if c.valid_json else " - arguments are not valid JSON")
            checks.append(Check("tool call", c.valid_json, detail, False))
    return checks


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        mark = "[ok]" if c.ok else ("[FAIL]" if c.required else "[warn]")
        lines.append(f"{mark:7}{c.name}: {c.detail}")
    return "\n".join(lines)
