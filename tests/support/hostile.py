"""A hostile upstream on loopback: it echoes every value it receives, in every encoding, split across reads.

Every request header value (and the credential after an auth scheme, and Basic's decoded `user:password`), every
query value (as sent and decoded) and every string in a JSON body is echoed back:
  - in response headers (`X-Echo-N`, and a `Set-Cookie` holding the first credential);
  - in the body, in each form: raw, percent-encoded, JSON-escaped with `\\/`, every character as `\\uXXXX`, and the
    base64 of `user:VALUE`; each form written in two halves with a pause between, so that it arrives split across
    two reads;
  - as SSE events (`stream: true`), a JSON body otherwise, an OpenAI-shaped error for model `hostile-401`;
  - compressed when the model is `hostile-gzip`, `hostile-deflate` or `hostile-br` (flushed per event).
"""

from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import parse_qsl, quote, unquote

from aiohttp import web

from tests.support.compress import Encoder

PLAIN_HEADERS = frozenset({"host", "content-length", "content-type", "accept", "accept-encoding", "user-agent"})


def received_values(request: web.Request, body: bytes) -> list[str]:
    values: list[str] = []
    for name, value in request.headers.items():
        if name.lower() in PLAIN_HEADERS or name.lower().startswith("x-stainless"):
            continue
        values.append(value)
        scheme, _, rest = value.partition(" ")
        if rest:
            values.append(rest)
            if scheme.lower() == "basic":
                pair = base64.b64decode(rest).decode()
                values += [pair, pair.partition(":")[2]]
    for part in request.query_string.split("&"):
        raw = part.partition("=")[2]
        if raw:
            values += [raw, unquote(raw)]
    values += [v for _, v in parse_qsl(request.query_string)]
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        doc = None
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack += node.values()
        elif isinstance(node, list):
            stack += node
        elif isinstance(node, str) and len(node) >= 8:
            values.append(node)
    return list(dict.fromkeys(v for v in values if v))


def forms(value: str) -> list[str]:
    return [
        value,
        quote(value, safe=""),
        json.dumps(value)[1:-1].replace("/", "\\/"),
        "".join(f"\\u{ord(c):04x}" for c in value),
        base64.b64encode(f"user:{value}".encode()).decode(),
    ]


async def _handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    values = received_values(request, body)
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        doc = {}
    model = str(doc.get("model", "")) if isinstance(doc, dict) else ""
    headers = {f"X-Echo-{i}": v for i, v in enumerate(values) if v.isascii() and v.isprintable()}
    if values:
        headers["Set-Cookie"] = f"sid={values[0]}; Path=/; HttpOnly"
    if model == "hostile-401":
        message = "Incorrect API key provided: " + ", ".join(values)
        err = {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}
        return web.json_response(err, status=401, headers=headers)
    coding = model.removeprefix("hostile-") if model in ("hostile-gzip", "hostile-deflate", "hostile-br") else None
    if coding is not None:
        headers["Content-Encoding"] = coding
    streamed = isinstance(doc, dict) and bool(doc.get("stream"))
    comp = Encoder(coding) if coding is not None else None
    texts = [f for v in values for f in forms(v)]
    if not streamed:
        # Each form goes into the JSON text as it is (each is valid inside a JSON string): the JSON-escaped ones
        # stay escaped on the wire.
        content = " | ".join(texts)
        data = (
            '{"id":"chatcmpl-hostile","object":"chat.completion","model":"' + (model or "hostile") + '",'
            '"choices":[{"index":0,"message":{"role":"assistant","content":"' + content + '"},"finish_reason":"stop"}]}'
        ).encode()
        if comp is not None:
            data = comp.piece(data) + comp.end()
        return web.Response(body=data, content_type="application/json", headers=headers)

    def pack(data: bytes) -> bytes:
        return comp.piece(data) if comp is not None else data

    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream"})
    await response.prepare(request)
    for i, text in enumerate(texts):
        head = (
            'data: {"id":"chatcmpl-hostile","object":"chat.completion.chunk","model":"' + (model or "hostile") + '",'
            f'"choices":[{{"index":0,"delta":{{"content":"[{i}] '
        ).encode()
        event = head + text.encode() + b' "},"finish_reason":null}]}\n\n'
        half = len(head) + len(text.encode()) // 2
        # The value itself is cut in two writes: it reaches the proxy split across two reads.
        await response.write(pack(event[:half]))
        await asyncio.sleep(0.005)
        await response.write(pack(event[half:]))
    end = {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "model": model or "hostile"}
    end["choices"] = [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    await response.write(pack(b"data: " + json.dumps(end).encode() + b"\n\n"))
    await response.write(pack(b"data: [DONE]\n\n") + (comp.end() if comp is not None else b""))
    await response.write_eof()
    return response


async def start_hostile(host: str = "127.0.0.1") -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    return runner, f"http://{host}:{runner.addresses[0][1]}"
