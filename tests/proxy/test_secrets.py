"""No secret a client sends (or an upstream echoes) reaches the cassette file, on any path."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import zstandard

from bench.core.cassette import Redactor, read_cassette
from bench.proxy import start_proxy
from tests.proxy.conftest import SECRET, raw_chat, sdk
from tests.support.upstream import Upstream

OTHERS = ("xkey-ABCDEFGH12345", "cookie-value-777777", "qs-secret-55555555", "field-secret-4444444")


async def test_no_client_secret_appears_in_the_decompressed_cassette(upstream: Upstream, cassettes: Path) -> None:
    redactor = Redactor.with_extra(json_fields=["password"])
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, redactor=redactor)
    client = sdk(proxy.url + "/v1")
    # The upstream echoes Authorization back in a header and in the text.
    echoed = await raw_chat(client, x_echo_auth=True, stream=True)
    assert SECRET.encode() in echoed
    await raw_chat(client, x_echo_auth=True)
    await client.close()
    headers = {"Authorization": f"Bearer {SECRET}", "X-Api-Key": OTHERS[0], "Cookie": f"session={OTHERS[1]}"}
    body = {"model": "m", "messages": [], "password": OTHERS[3]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.url}/v1/chat/completions?api-key={OTHERS[2]}", json=body, headers=headers) as r,
    ):
        assert r.status == 200
        await r.read()
    await proxy.close()

    assert proxy.cassette_path is not None
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(proxy.cassette_path.read_bytes())
    for secret in (SECRET, *OTHERS):
        assert secret.encode() not in raw, secret
    records = read_cassette(proxy.cassette_path)[1]
    assert "request.headers.authorization" in records[0].redacted
    assert any(place.startswith("scrubbed:response.chunks") for place in records[0].redacted)
    assert {"request.headers.x-api-key", "request.headers.cookie", "request.query.api-key"} <= set(records[2].redacted)
