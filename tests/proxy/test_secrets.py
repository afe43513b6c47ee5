"""No secret a client sends (or an upstream echoes) reaches the cassette file, on any path."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
import zstandard

from bench.core.cassette import Redactor, read_cassette
from bench.proxy import start_proxy
from tests.proxy.conftest import MESSAGES, SECRET, raw_chat, sdk
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


async def test_a_key_echoed_token_by_token_is_scrubbed_from_the_events_that_carry_it(
    upstream: Upstream, cassettes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The upstream echoes the key three characters an event: no event holds it, the text the client assembles does.
    The cassette holds none of it, `bench cassette show` assembles no key, and every read keeps its time."""
    from bench.cli import main
    from bench.core.parse import parse_exchange

    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(proxy.url + "/v1")
    stream = await client.chat.completions.create(
        model="test-model", messages=MESSAGES, stream=True, extra_body={"x_echo_auth": "tokens"}
    )
    seen = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    await client.close()
    await proxy.close()
    assert f"your key is {SECRET}." in seen  # what the client got: the upstream's answer, unchanged
    assert proxy.cassette_path is not None
    (record,) = read_cassette(proxy.cassette_path)[1]
    parsed = parse_exchange(record)
    assert parsed.content.endswith("your key is [REDACTED].") and SECRET not in parsed.content
    assert "scrubbed:response.chunks (a secret split across events)" in record.redacted
    assert len(record.response.chunks) == len(record.response.chunk_us)  # no read lost its time
    assert parsed.finish_reason == "stop"  # the rest of the stream as it was
    body = b"".join(record.response.chunks)
    pieces = [SECRET[i : i + 3] for i in range(1, len(SECRET) - 3)]  # any 3 characters of it, wherever cut
    assert not [p for p in pieces if f'"content":"{p}"'.encode() in body]  # no event keeps a piece
    assert main(["cassette", "show", str(proxy.cassette_path), "--id", record.id]) == 0
    assert SECRET not in capsys.readouterr().out
