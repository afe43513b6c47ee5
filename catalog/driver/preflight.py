"""Fail before a run starts: an unreachable upstream, a rejected key or an unknown model, each in one line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiohttp
import orjson

from bench.core.errors import BenchError

PROBE_TIMEOUT = 15.0


def api_base(url: str) -> str:
    """The server root: requests add /v1/..., so a base URL given with /v1 (as SDKs take it) works too."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


async def list_models(session: aiohttp.ClientSession, base: str, api_key: str | None) -> list[str] | None:
    """The served model ids, or None if the gateway has no models endpoint. Raises BenchError for the fatal cases."""
    url = f"{api_base(base)}/v1/models"
    try:
        async with session.get(url, headers=auth_headers(api_key)) as resp:
            body = await resp.read()
            status = resp.status
    except aiohttp.ClientConnectorError as exc:
        raise BenchError(
            f"cannot reach upstream {api_base(base)} ({exc.strerror or exc}); start the gateway or fix --upstream"
        ) from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise BenchError(f"upstream {api_base(base)} did not answer ({type(exc).__name__}); check --upstream") from None
    if status in (401, 403):
        raise BenchError(
            f"upstream {api_base(base)} rejected the API key (HTTP {status}); set BENCH_API_KEY or api_key in config"
        )
    if status >= 400:
        return None
    try:
        doc = orjson.loads(body)
        return [str(m["id"]) for m in doc["data"]]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


async def probe_model(session: aiohttp.ClientSession, base: str, api_key: str | None, model: str) -> tuple[int, str]:
    """One tiny streamed request, read up to its status (the answer itself does not matter), and the error text."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "ping"}],
        "max_tokens": 1,
        "stream": True,
    }
    try:
        async with session.post(
            f"{api_base(base)}/v1/chat/completions", data=orjson.dumps(body), headers=auth_headers(api_key)
        ) as resp:
            if resp.status < 400:
                resp.close()
                return resp.status, ""
            text = (await resp.read()).decode("utf-8", "replace")
            return resp.status, text[:300]
    except (aiohttp.ClientError, TimeoutError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"


async def preflight(base: str, api_key: str | None, models: Sequence[str]) -> None:
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        served = await list_models(session, base, api_key)
        for model in models:
            if served is not None and model in served:
                continue
            # Not listed (gateways often route more than they list): ask for one token to be sure.
            status, text = await probe_model(session, base, api_key, model)
            if status in (401, 403):
                raise BenchError(
                    f"upstream rejected the API key for model {model!r} (HTTP {status}); set BENCH_API_KEY"
                )
            if status in (400, 404) and "model" in text.lower():
                known = f"; served models: {', '.join(served[:10])}" if served else ""
                raise BenchError(f"unknown model {model!r} at {api_base(base)}{known}; fix --model")
