"""Promises of docs/proxy.md that no other test held: the start and stop lines, the flags' defaults, every default
secret name, the short-secret limit, `--token-env`'s `api-key` form, any method and path, the connection pool."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path
from urllib.parse import parse_qsl

import aiohttp
import pytest
import zstandard
from aiohttp import web

from bench.cli import build_parser
from bench.core.cassette import read_cassette
from bench.core.cassette.records import Exchange
from bench.core.serving import listen
from bench.proxy import start_proxy
from bench.proxy.app import ClientLimits
from tests.proxy.conftest import MESSAGES
from tests.support.upstream import Upstream

ROOT = Path(__file__).resolve().parents[2]
REDACTED = "[REDACTED]"


def only_record(cassette: Path | None) -> Exchange:
    assert cassette is not None
    _, records = read_cassette(cassette)
    [record] = records
    return record


async def test_start_and_stop_lines_name_the_address_upstream_mode_and_cassette(
    upstream: Upstream, tmp_path: Path
) -> None:
    # A query in --upstream is never printed: the start line shows the bare base URL (credentials are refused:
    # test_proxy_hostile.py).
    port = upstream.url.rsplit(":", 1)[1]
    given = f"http://127.0.0.1:{port}/?key=k-0123456789"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "proxy", "--port", "0", "--upstream", given, "--cassettes", str(tmp_path),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode() for _ in range(3)]
        listening = re.fullmatch(
            r"bench proxy: listening on (http://127\.0\.0\.1:\d+) \(clients: base URL (http://127\.0\.0\.1:\d+)/v1\)\n",
            lines[0],
        )
        assert listening is not None and listening.group(1) == listening.group(2)  # --host's default: 127.0.0.1
        assert lines[1] == f"bench proxy: upstream http://127.0.0.1:{port}, mode record\n"
        written = re.fullmatch(r"bench proxy: writing (.+/rec-\d{8}T\d{6}-\d+\.cassette)\n", lines[2])
        assert written is not None and Path(written.group(1)).parent == tmp_path
        async with aiohttp.ClientSession() as session:
            body = {"model": "test-model", "messages": MESSAGES}
            async with session.post(listening.group(1) + "/v1/chat/completions", json=body) as resp:
                assert resp.status == 200
                await resp.read()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    assert stdout.decode().splitlines()[-1] == (
        f"bench proxy: stopped; 1 exchange(s) recorded to {written.group(1)}, 0 upstream error(s)"
    )
    assert b"pw-0123456789" not in stdout + stderr and b"k-0123456789" not in stdout + stderr


def test_the_documented_defaults() -> None:
    args = build_parser().parse_args(["proxy"])
    assert (args.mode, args.cassettes, args.pace, args.host) == ("record", Path("cassettes"), "realtime", "127.0.0.1")
    assert args.port == 8080
    assert (args.idle_timeout, args.request_timeout, args.grace) == (300.0, None, 10.0)
    assert (args.header_timeout, args.keepalive_timeout, args.body_timeout) == (60.0, 75.0, 60.0)
    # start_proxy's own bounds, for callers that pass none (bench record, the pytest plugin): nginx's, as documented.
    limits = ClientLimits()
    assert (limits.header_timeout, limits.keepalive_timeout, limits.body_timeout) == (60.0, 75.0, 60.0)


# Every default secret header, in the case a client might send it (names are case-insensitive).
SECRET_HEADERS = {
    "Proxy-Authorization": "Basic cHJveHktdXNlcjpwcm94eS1wYXNz",
    "API-Key": "hdr-api-key-0123456789",
    "X-Api-Key": "hdr-x-api-key-0123456789",
    "Cookie": "session=hdr-cookie-0123456789",
    "X-Goog-Api-Key": "hdr-goog-0123456789",
    "Anthropic-Api-Key": "hdr-anthropic-0123456789",
    "OpenAI-Organization": "org-hdr-0123456789",
    "OpenAI-Project": "proj-hdr-0123456789",
}
SECRET_QUERY = {
    "Key": "q-key-0123456789",
    "API-KEY": "q-api-key-0123456789",
    "api_key": "q-api_key-0123456789",
    "Access_Token": "q-access-0123456789",
    "token": "q-token-0123456789",
    "code": "q-code-0123456789",
}
SECRET_FIELDS = {
    "api_key": "b-api_key-0123456789",
    "apiKey": "b-apiKey-0123456789",
    "password": "b-password-0123456789",
    "secret": "b-secret-0123456789",
    "token": "b-token-0123456789",
}


async def test_every_default_secret_header_query_parameter_and_body_field_is_replaced_where_it_stands(
    upstream: Upstream, cassettes: Path
) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    query = "&".join(f"{k}={v}" for k, v in SECRET_QUERY.items()) + "&keep=visible%20value"
    body = {
        "model": "test-model",
        "messages": MESSAGES,
        **SECRET_FIELDS,
        "auth": [{"PASSWORD": "b-nested-0123456789"}],  # any depth, inside arrays, any case
        "options": {"secret": 12345678, "keep": "visible"},  # a default field that holds no string is kept
    }
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{proxy.url}/v1/chat/completions?{query}", json=body, headers={**SECRET_HEADERS, "X-Keep": "kept"}
            ) as resp,
        ):
            assert resp.status == 200
            await resp.read()
    finally:
        await proxy.close()
    # The upstream got every value (Proxy-Authorization is hop-by-hop, for this hop only): only the record is redacted.
    sent = {name.lower(): value for name, value in upstream.requests[-1].headers.items()}
    forwarded = {name.lower(): value for name, value in SECRET_HEADERS.items() if name != "Proxy-Authorization"}
    assert {name: sent.get(name) for name in forwarded} == forwarded
    record = only_record(proxy.cassette_path)
    headers = {name.lower(): value for name, value in record.request.headers}
    assert {name.lower(): headers[name.lower()] for name in SECRET_HEADERS} == dict.fromkeys(
        (name.lower() for name in SECRET_HEADERS), REDACTED
    )
    assert headers["x-keep"] == "kept"
    # Each secret value is replaced; the rest of the query keeps its exact bytes.
    assert record.request.query == "&".join(f"{k}={REDACTED}" for k in SECRET_QUERY) + "&keep=visible%20value"
    stored = json.loads(record.request.body)
    assert {k: stored[k] for k in SECRET_FIELDS} == dict.fromkeys(SECRET_FIELDS, REDACTED)
    assert stored["auth"] == [{"PASSWORD": REDACTED}] and stored["options"] == {"secret": 12345678, "keep": "visible"}
    assert stored["messages"] == MESSAGES
    everything = repr(record).encode()
    leaked = [
        v for v in [*SECRET_HEADERS.values(), *SECRET_QUERY.values(), *SECRET_FIELDS.values()] if v in repr(record)
    ]
    assert not leaked and b"b-nested-0123456789" not in everything
    assert sorted(dict(parse_qsl(record.request.query))) == sorted([*SECRET_QUERY, "keep"])


async def test_a_short_secret_is_replaced_where_it_stands_but_not_scrubbed_elsewhere(
    upstream: Upstream, cassettes: Path
) -> None:
    short = "k-12345"  # 7 characters: replacing every copy of so short a string would corrupt streams
    long = "k-12345678"  # 10 characters: scrubbed everywhere
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    body = {"model": "test-model", "messages": [{"role": "user", "content": f"say {short} and {long}"}]}
    try:
        for key in (short, long):
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"{proxy.url}/v1/chat/completions", json=body, headers={"x-api-key": key}) as resp,
            ):
                assert resp.status == 200
                await resp.read()
    finally:
        await proxy.close()
    assert proxy.cassette_path is not None
    _, (with_short, with_long) = read_cassette(proxy.cassette_path)
    for record in (with_short, with_long):
        assert dict(record.request.headers)["x-api-key"] == REDACTED
    # The short key stays where it is echoed (the body keeps its exact bytes); the long one is scrubbed there.
    assert json.loads(with_short.request.body) == body
    assert json.loads(with_long.request.body)["messages"][0]["content"] == f"say {short} and {REDACTED}"


async def test_token_env_accepts_bearer_or_api_key_refuses_others_with_401_and_never_forwards_it(
    upstream: Upstream, cassettes: Path
) -> None:
    token = "proxy-token-abcdef0123"
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, client_token=token)
    url = f"{proxy.url}/v1/models"
    statuses: dict[str, int] = {}
    refused: list[dict[str, object]] = []
    try:
        async with aiohttp.ClientSession() as session:
            for name, headers in {
                "bearer": {"Authorization": f"Bearer {token}"},
                "api-key": {"api-key": token},
                "none": {},
                "wrong bearer": {"Authorization": "Bearer not-the-token"},
                "wrong api-key": {"api-key": "not-the-token"},
            }.items():
                async with session.get(url, headers=headers) as resp:
                    statuses[name] = resp.status
                    if resp.status == 401:
                        refused.append((await resp.json())["error"])
                    else:
                        await resp.read()
    finally:
        await proxy.close()
    assert statuses == {"bearer": 200, "api-key": 200, "none": 401, "wrong bearer": 401, "wrong api-key": 401}
    assert all(set(e) == {"message", "type", "param", "code"} for e in refused)
    assert len(upstream.requests) == 2  # the refused requests never went upstream
    for request in upstream.requests:
        assert token not in json.dumps(request.headers)
    # The proxy's own 401s are not exchanges: the cassette holds the two answered requests only.
    assert proxy.cassette_path is not None
    _, records = read_cassette(proxy.cassette_path)
    assert [(r.request.path, r.response.status) for r in records] == [("/v1/models", 200)] * 2


async def test_any_method_and_path_goes_through_as_sent(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.put(f"{proxy.url}/v1/files/file-1?purpose=batch&x=1", data=b"raw \x00 bytes") as resp:
                put_status, put_body = resp.status, await resp.read()
            async with session.delete(f"{proxy.url}/custom/route") as resp:
                delete_status = resp.status
                await resp.read()
    finally:
        await proxy.close()
    put, delete = upstream.requests
    assert (put.method, put.path, put.query, put.body) == (
        "PUT",
        "/v1/files/file-1",
        "purpose=batch&x=1",
        b"raw \x00 bytes",
    )
    assert (delete.method, delete.path) == ("DELETE", "/custom/route")
    # The upstream's own 404 for an unknown route passes through untouched and is recorded as complete.
    assert put_status == delete_status == 404 and json.loads(put_body)["error"]
    assert proxy.cassette_path is not None
    _, records = read_cassette(proxy.cassette_path)
    assert [(r.request.method, r.request.path, r.request.query) for r in records] == [
        ("PUT", "/v1/files/file-1", "purpose=batch&x=1"),
        ("DELETE", "/custom/route", ""),
    ]
    assert [r.outcome for r in records] == ["complete", "complete"]


async def test_more_than_100_streams_are_upstream_at_once(cassettes: Path) -> None:
    """The upstream answers no request before all of them have arrived: with aiohttp's default pool of 100
    connections the 101st would queue inside the proxy and every request would wait for the upstream's give-up."""
    streams = 120
    arrived = 0
    everyone = asyncio.Event()

    async def hold(request: web.Request) -> web.Response:
        nonlocal arrived
        arrived += 1
        if arrived == streams:
            everyone.set()
        try:
            await asyncio.wait_for(everyone.wait(), 30)
        except TimeoutError:
            return web.json_response({"error": {"message": f"only {arrived} arrived"}}, status=500)
        return web.json_response({"object": "list", "data": []})

    app = web.Application()
    app.router.add_get("/v1/models", hold)
    runner, _site, url = await listen(app, "127.0.0.1", 0)
    proxy = await start_proxy(upstream=url, cassettes=cassettes, mode="passthrough")
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def one() -> int:
                async with session.get(f"{proxy.url}/v1/models") as resp:
                    await resp.read()
                    return resp.status

            statuses = await asyncio.gather(*(one() for _ in range(streams)))
    finally:
        await proxy.close()
        await runner.cleanup()
    assert statuses == [200] * streams and arrived == streams


@pytest.mark.parametrize("mode", ["replay"])
async def test_replay_needs_no_upstream_on_the_command_line(upstream: Upstream, tmp_path: Path, mode: str) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=tmp_path)
    async with aiohttp.ClientSession() as session, session.get(f"{recorder.url}/v1/models") as resp:
        recorded = await resp.read()
    await recorder.close()
    await upstream.close()  # nothing listens there any more
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "proxy", "--port", "0", "--mode", mode, "--pace", "instant",
        "--cassettes", str(tmp_path), cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode() for _ in range(3)]
        url = lines[0].split("listening on ")[1].split()[0]
        assert lines[1] == "bench proxy: upstream (none: replay only), mode replay\n"
        assert re.fullmatch(r"bench proxy: writing .+/replay-[^/]+\.cassette\n", lines[2])
        async with aiohttp.ClientSession() as session, session.get(f"{url}/v1/models") as resp:
            assert resp.status == 200 and await resp.read() == recorded
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0


async def test_the_cassette_header_states_the_settings_and_whether_a_key_or_token_was_used_never_them(
    upstream: Upstream, cassettes: Path
) -> None:
    key, token = "sk-upstream-key-0123456789", "proxy-token-0123456789"
    port = upstream.url.rsplit(":", 1)[1]
    given = f"http://127.0.0.1:{port}/?key=q-0123456789"
    proxy = await start_proxy(upstream=given, cassettes=cassettes, upstream_key=key, client_token=token, pace="x2")
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{proxy.url}/v1/models", headers={"Authorization": f"Bearer {token}"}) as resp,
        ):
            assert resp.status == 200
            await resp.read()
    finally:
        await proxy.close()
    assert proxy.cassette_path is not None
    header, _ = read_cassette(proxy.cassette_path)
    s = header.settings
    assert (s.upstream, s.mode, s.pace, s.upstream_key, s.client_token) == (upstream.url, "record", "x2", True, True)
    data, plain = proxy.cassette_path.read_bytes(), b""
    while data:  # every zstd frame of the file
        dctx = zstandard.ZstdDecompressor().decompressobj()
        plain += dctx.decompress(data)
        data = dctx.unused_data
    assert b"/v1/models" in plain  # the exchange itself was searched
    for secret in (key, token, "pw-0123456789", "q-0123456789"):
        assert secret.encode() not in plain
