"""A gateway that compresses its responses (gzip, deflate, br; streamed and not): the client gets the exact bytes, the
cassette keeps them, and the exchange is recorded, parsed, shown, exported and scored as if it were plain."""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from openai import AsyncOpenAI

from bench.cli.cassette_command import har_entry, jsonl_record, render_exchange
from bench.core.cassette import read_cassette
from bench.core.cassette.records import Exchange
from bench.core.parse import parse_exchange
from bench.proxy import start_proxy
from tests.proxy.conftest import MESSAGES, TOOLS
from tests.support.compress import CODINGS, start_compressing_gateway
from tests.support.upstream import Upstream

REQUESTS: list[dict[str, Any]] = [
    {},
    {"stream": True, "stream_options": {"include_usage": True}},
    {"tools": TOOLS},
    {"tools": TOOLS, "stream": True},
]


async def record_all(upstream_url: str, cassettes: Path) -> tuple[list[bytes], list[Any], list[Exchange]]:
    """Each request through a recording proxy with the real SDK: the wire bytes the client got, what the SDK made of
    them (decoded by its HTTP client), and the records."""
    proxy = await start_proxy(upstream=upstream_url, cassettes=cassettes)
    client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-test-compressed", max_retries=0, timeout=30)
    wire: list[bytes] = []
    seen: list[Any] = []
    for extra in REQUESTS:
        async with client.chat.completions.with_streaming_response.create(
            model="test-model", messages=MESSAGES, **extra
        ) as resp:
            raw = b"".join([c async for c in resp.http_response.aiter_raw()])
        wire.append(raw)
        if extra.get("stream"):
            stream = await client.chat.completions.create(model="test-model", messages=MESSAGES, **extra)
            seen.append([chunk.model_dump(exclude={"id"}) async for chunk in stream])
        else:
            seen.append((await client.chat.completions.create(model="test-model", messages=MESSAGES, **extra)).choices)
    await client.close()
    await proxy.close()
    assert proxy.cassette_path is not None
    return wire, seen, read_cassette(proxy.cassette_path)[1]


def facts(record: Exchange) -> dict[str, Any]:
    p = parse_exchange(record)
    return {
        "content": p.content,
        "calls": [(c.name, c.arguments, c.valid_json) for c in p.tool_calls],
        "finish": p.finish_reason,
        "usage": p.usage,
        "model": p.model,
        "events": p.timing.n_events,
        "findings": p.findings,
        "outcome": record.outcome,
        "recorded model": record.upstream.model,
        "has first token": record.timing.first_token is not None,
    }


@pytest.mark.parametrize("coding", CODINGS)
async def test_a_compressed_gateway_is_recorded_parsed_and_shown_as_if_plain(
    coding: str, upstream: Upstream, tmp_path: Path
) -> None:
    runner, gateway = await start_compressing_gateway(upstream.url, coding)
    try:
        wire, seen, records = await record_all(gateway, tmp_path / "compressed")
    finally:
        await runner.cleanup()
    plain_wire, plain_seen, plain_records = await record_all(upstream.url, tmp_path / "plain")

    assert seen == plain_seen  # the SDK decoded the same answers
    # The cassette keeps the wire bytes, compressed, exactly as the client got them.
    wire_records = records[0::2]
    assert [b"".join(r.response.chunks) for r in wire_records] == wire
    assert all(dict(r.response.headers).get("Content-Encoding") == coding for r in wire_records)
    assert wire != plain_wire
    for rec, plain in zip(wire_records, plain_records[0::2], strict=True):
        got = facts(rec)
        assert got == facts(plain)
        assert got["outcome"] == "complete" and got["recorded model"] == "test-model"
        assert got["has first token"] == bool(rec.response.streamed)
        assert got["content"] or got["calls"]
        shown = render_exchange(rec, "c.cassette", len(records))
        assert f"{coding}," in shown and (got["content"] or got["calls"][0][0]) in shown
        har = har_entry(rec)["response"]["content"]
        assert har["text"].encode() == b"".join(plain.response.chunks)
        assert har["compression"] == len(har["text"].encode()) - len(b"".join(rec.response.chunks))
        line = orjson.loads(orjson.dumps(jsonl_record(rec)))
        assert line["response"]["decoded"].encode() == b"".join(plain.response.chunks)


async def test_the_first_token_is_the_read_whose_decoded_bytes_complete_it(upstream: Upstream, tmp_path: Path) -> None:
    # A slow first token after a quick role chunk: the first token's time must be the later read's, not the first.
    runner, gateway = await start_compressing_gateway(upstream.url, "gzip")
    proxy = await start_proxy(upstream=gateway, cassettes=tmp_path)
    client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0, timeout=30)
    stream = await client.chat.completions.create(
        model="test-model", messages=MESSAGES, stream=True, extra_body={"x_delay_ms": 60, "x_words": 3}
    )
    _ = [c async for c in stream]
    await client.close()
    await proxy.close()
    await runner.cleanup()
    assert proxy.cassette_path is not None
    record = read_cassette(proxy.cassette_path)[1][0]
    offsets = []
    total = 0
    for delta in record.response.chunk_us:
        total += delta
        offsets.append(total)
    # Independently of bench's decoder: the read at which the decoded stream first holds a word.
    z = zlib.decompressobj(zlib.MAX_WBITS | 16)
    text = b""
    first_word_read = None
    for i, chunk in enumerate(record.response.chunks):
        text += z.decompress(chunk)
        if re.search(rb'"content":"[^"]', text):
            first_word_read = i
            break
    assert first_word_read is not None
    assert record.timing.first_token == offsets[first_word_read]
    if first_word_read > 0:  # the role chunk's read came first (unless both arrived in one read): a later time
        # (not "60 ms later": how soon each read is taken depends on the load, which the test does not control)
        assert record.timing.first_token > offsets[0]


def test_a_catalog_recorded_through_a_compressing_gateway_scores_as_the_plain_run(tmp_path: Path) -> None:
    """The sim behind a compressing gateway, recorded by `bench record`'s driver through the proxy, then rescored
    offline: every result (status, pass, score, failure type) equals the same catalog recorded without compression."""
    import asyncio

    from bench.catalog.driver.config import RecordConfig
    from bench.catalog.driver.record_run import record
    from bench.catalog.sim import start_sim
    from bench.scorer.checked_catalog import load_catalog
    from tests.support.rescored import rescored as rescore

    catalog = load_catalog(None)
    tests = [t.id for t in catalog.select(["tools", "json"])]
    models = ["oracle", "flawed-invalid-json", "flawed-wrong-args"]

    async def go(coding: str | None, out: Path, stream: bool) -> None:
        async with await start_sim(catalog=catalog) as sim:
            url, runner = sim.url, None
            if coding is not None:
                runner, url = await start_compressing_gateway(sim.url, coding)
            try:
                cfg = RecordConfig(upstream=url, models=models, out=str(out), concurrency=8, tests=tests, stream=stream)
                await record(cfg, catalog)
            finally:
                if runner is not None:
                    await runner.cleanup()

    def scores(coding: str | None, stream: bool) -> dict[tuple[str, str], tuple[Any, ...]]:
        out = tmp_path / f"{coding or 'plain'}-{stream}"
        asyncio.run(go(coding, out, stream))
        _, results = rescore([out], catalog=catalog, jobs=1)
        return {(r.model, r.test): (r.status, r.passed, r.score, r.failure_type) for r in results}

    for stream in (True, False):
        plain = scores(None, stream)
        assert len(plain) == len(models) * len(tests)
        assert any(v[1] for v in plain.values()) and not all(v[1] for v in plain.values())
        for coding in CODINGS:
            assert scores(coding, stream) == plain, (coding, stream)
