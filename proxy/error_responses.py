"""OpenAI-shaped error bodies, so that SDKs raise their usual exceptions with a readable message.

Every error the proxy itself produces (400 for a malformed request, 401 for a missing client token, 408 for a client
too slow to send its request, 413 for a body over the limit, 500 for a bug of its own, 502/504 for a failed upstream,
404 for a replay miss, 503 while shutting down) goes through here; the upstream's own errors pass through untouched.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

JSON_TYPE = "application/json"
ERROR_HEADER = "X-Bench-Proxy-Error"
# Where aiohttp's parser messages start quoting the offending bytes (`: b'...'`, ` 'line'`): never repeated, since
# they can hold a client's key.
_QUOTED = re.compile(r"[:\s]+b?['\"].*")


def error_body(message: str, *, type: str, code: str, param: str | None = None, **extra: Any) -> bytes:
    error: dict[str, Any] = {"message": message, "type": type, "param": param, "code": code}
    error.update(extra)
    return json.dumps({"error": error}, ensure_ascii=False).encode()


def error_response(status: int, message: str, *, type: str, code: str, **extra: Any) -> web.Response:
    return web.Response(
        status=status,
        body=error_body(message, type=type, code=code, **extra),
        content_type=JSON_TYPE,
        headers={ERROR_HEADER: code},
    )


def raw_error(status: int, reason: str, message: str, *, type: str, code: str) -> bytes:
    """A whole HTTP/1.1 error response that closes the connection, for a connection with no request to answer."""
    body = error_body(message, type=type, code=code)
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {JSON_TYPE}\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n{ERROR_HEADER}: {code}\r\n\r\n"
    )
    return head.encode() + body


def parse_problem(message: str) -> str:
    """What is wrong with a malformed request, from aiohttp's parser message, without the bytes it quotes."""
    kept = []
    for line in message.splitlines():
        line = line.strip()
        if line.startswith(("b'", 'b"', "^")):
            break
        if line:
            kept.append(line.rstrip(":").strip())
    text = _QUOTED.sub("", ": ".join(kept)).strip(" :.")
    return "".join(c for c in text if c.isprintable())[:200] or "unreadable request"


def bad_request(problem: str, status: int = 400) -> web.Response:
    resp = error_response(
        status,
        f"bench proxy: malformed HTTP request: {problem}",
        type="invalid_request_error",
        code="bad_request",
    )
    resp.force_close()
    return resp


def internal_error(status: int) -> web.Response:
    resp = error_response(
        status, "bench proxy: internal error; its log has the details", type="server_error", code="proxy_error"
    )
    resp.force_close()
    return resp


def too_large(size: int | None, limit: int) -> web.Response:
    what = f"of {size} bytes " if size is not None else ""
    resp = error_response(
        413,
        f"bench proxy: request body {what}is over the proxy's limit of {limit >> 20} MiB",
        type="invalid_request_error",
        code="request_too_large",
    )
    resp.force_close()
    return resp


def body_timeout(seconds: float) -> web.Response:
    resp = error_response(
        408,
        f"bench proxy: request body not received within {seconds:g} s (--body-timeout)",
        type="invalid_request_error",
        code="request_timeout",
    )
    resp.force_close()
    return resp


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
