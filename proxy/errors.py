"""OpenAI-shaped error bodies, so that SDKs raise their usual exceptions with a readable message.

Every error the proxy itself produces (401 for a missing client token, 502/504 for a failed upstream, 404 for a
replay miss, 503 while shutting down) goes through here; the upstream's own errors pass through untouched.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

JSON_TYPE = "application/json"


def error_body(message: str, *, type: str, code: str, param: str | None = None, **extra: Any) -> bytes:
    error: dict[str, Any] = {"message": message, "type": type, "param": param, "code": code}
    error.update(extra)
    return json.dumps({"error": error}, ensure_ascii=False).encode()


def error_response(status: int, message: str, *, type: str, code: str, **extra: Any) -> web.Response:
    return web.Response(
        status=status,
        body=error_body(message, type=type, code=code, **extra),
        content_type=JSON_TYPE,
        headers={"X-Bench-Proxy-Error": code},
    )


def unauthorized() -> web.Response:
    return error_response(
        401,
        "bench proxy: missing or wrong token; send the proxy's token as the API key (Authorization: Bearer TOKEN)",
        type="invalid_request_error",
        code="invalid_api_key",
    )


def shutting_down() -> web.Response:
    resp = error_response(503, "bench proxy is shutting down; retry later", type="server_error", code="proxy_closing")
    resp.force_close()
    return resp
