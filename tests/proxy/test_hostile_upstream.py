"""`bench proxy` as a real process in front of an upstream that echoes every secret it receives, in every encoding,
split across reads, in headers, bodies, SSE events, compressed bodies and error messages. Then every artifact is
searched for every form of every secret: the cassette (decompressed, and its compressed bodies decoded), `bench
cassette show` of each exchange, the JSONL and HAR exports, the proxy's stdout and stderr (its log), and the proxy's
own error bodies. Each must hold none."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import openai
import pytest
import zstandard
from openai import AsyncOpenAI

from bench.cli import main
from bench.core.cassette import read_cassette
from bench.core.decoding import decoded_record_reads
from tests.support.hostile import start_hostile

ROOT = Path(__file__).resolve().parents[2]

UPSTREAM_KEY = "up-key/hostile+0123456789"
CLIENT_TOKEN = "proxy-token-0123456789"
X_API_KEY = "xkey-ABCDEFGH12345"
ORG_SECRET = "org-secret-H0STILE-99"
COOKIE = "cookie-value-777777"
QUERY_KEY = "qkey-SECRET/x+y"
BODY_KEY = "body-api-key-31415926"
CAMEL_KEY = "camel-api-key-27182818"
PIN = "org-pin-11235813"
PASSWORD = "hunter2-correct-horse"
LOWER_BEARER = "sk-lower-bearer-0000111"
TOKEN_SCHEME = "tok-scheme-99998888"
CTL_KEY = "ctl-key-in-bad-header-5555"
URL_KEY = "url-query-key-12121212"

SECRETS = (
    UPSTREAM_KEY,
    CLIENT_TOKEN,
    X_API_KEY,
    ORG_SECRET,
    COOKIE,
    QUERY_KEY,
    BODY_KEY,
    CAMEL_KEY,
    PIN,
    PASSWORD,
    LOWER_BEARER,
    TOKEN_SCHEME,
    CTL_KEY,
    URL_KEY,
)
MODELS = ("hostile", "hostile-gzip", "hostile-deflate", "hostile-br")
_B64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{12,}")


def leaks(blob: bytes, secret: str) -> int:
    """How many forms of `secret` occur in `blob`: raw, percent-encoded, JSON-escaped, \\u-escaped, or inside any
    base64 text (decoded at every alignment)."""
    raw = secret.encode()
    forms = {
        raw,
        quote(secret, safe="").encode(),
        quote_plus(secret, safe="").encode(),
        json.dumps(secret)[1:-1].replace("/", "\\/").encode(),
        "".join(f"\\u{ord(c):04x}" for c in secret).encode(),
        "".join(f"\\u{ord(c):04X}" for c in secret).encode(),
    }
    found = sum(blob.count(f) for f in forms)
    for run in _B64_RUN.findall(blob):
        for start in range(4):
            piece = run[start:]
            piece = piece[: len(piece) - len(piece) % 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    if raw in decode(piece):
                        found += 1
                except (binascii.Error, ValueError):
                    pass
    return found


@asynccontextmanager
async def bench_proxy(
    env: dict[str, str], *args: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, Path, list[bytes]]]:
    """A `bench proxy` subprocess once it listens: it, its URL, its cassette and the stdout lines read so far."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench",
        "proxy",
        "--port",
        "0",
        *args,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    url = cassette = None
    lines: list[bytes] = []
    try:
        while cassette is None:
            raw = await asyncio.wait_for(proc.stdout.readline(), 30)
            lines.append(raw)
            line = raw.decode()
            assert line, "bench proxy exited before listening"
            if m := re.search(r"listening on (http://\S+)", line):
                url = m.group(1)
            if m := re.search(r"writing (\S+)", line):
                cassette = Path(m.group(1))
        assert url is not None
        yield proc, url, cassette, lines
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def raw_request(url: str, head: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    return data


async def chats(client: AsyncOpenAI, **extra: Any) -> list[bytes]:
    """Every model, streamed and not, plus the error; the raw bytes the client got."""
    out: list[bytes] = []
    for model in MODELS:
        for stream in (False, True):
            async with client.chat.completions.with_streaming_response.create(
                model=model, messages=[{"role": "user", "content": "hi"}], stream=stream, **extra
            ) as resp:
                out.append(b"".join([c async for c in resp.iter_bytes()]))
    with pytest.raises(openai.AuthenticationError) as error:
        await client.chat.completions.create(model="hostile-401", messages=[{"role": "user", "content": "hi"}], **extra)
    out.append(error.value.response.content)
    return out


def artifacts(cassette: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    out["cassette"] = zstandard.ZstdDecompressor().decompressobj().decompress(cassette.read_bytes())
    records = read_cassette(cassette)[1]
    out["cassette bodies decoded"] = b"".join(
        decoded_record_reads(r.response.headers, r.response.chunks).body for r in records
    )
    capsys.readouterr()
    show = b""
    for record in records:
        assert main(["cassette", "show", str(cassette), "--id", record.id]) == 0
        captured = capsys.readouterr()
        show += (captured.out + captured.err).encode()
    out["cassette show"] = show
    for fmt in ("jsonl", "har"):
        target = tmp_path / f"export.{fmt}"
        assert main(["cassette", "export", str(cassette), "--format", fmt, "-o", str(target)]) == 0
        captured = capsys.readouterr()
        out[f"export {fmt}"] = target.read_bytes() + (captured.out + captured.err).encode()
    return out


@pytest.mark.parametrize("keys", ["proxy keys", "client keys"])
async def test_no_secret_reaches_any_artifact_from_a_hostile_upstream(
    keys: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner, upstream = await start_hostile()
    cassettes = tmp_path / "cassettes"
    env = {"BENCH_T_UPSTREAM_KEY": UPSTREAM_KEY, "BENCH_T_TOKEN": CLIENT_TOKEN}
    # A key in the upstream URL's query must not be printed either (user:password@ is refused: test_proxy_hostile.py).
    flags = ["--upstream", upstream + f"?key={URL_KEY}"]
    flags += ["--cassettes", str(cassettes)]
    flags += ["--secret-header", "X-Org-Secret", "--secret-field", "org_pin"]
    if keys == "proxy keys":
        flags += ["--upstream-key-env", "BENCH_T_UPSTREAM_KEY", "--token-env", "BENCH_T_TOKEN"]
    extra: dict[str, Any] = {
        "extra_headers": {"X-Api-Key": X_API_KEY, "X-Org-Secret": ORG_SECRET, "Cookie": f"session={COOKIE}"},
        "extra_query": {"key": QUERY_KEY},
        "extra_body": {"api_key": BODY_KEY, "auth": [{"apiKey": CAMEL_KEY}], "options": {"org_pin": PIN}},
    }
    errors: list[bytes] = []
    try:
        async with bench_proxy(env, *flags) as (proc, url, cassette, start_lines):
            if keys == "proxy keys":
                client = AsyncOpenAI(base_url=url + "/v1", api_key=CLIENT_TOKEN, max_retries=0, timeout=30)
                got = await chats(client, **extra)
                # The upstream saw the proxy's key and echoed it: the test is only worth something if it did.
                assert UPSTREAM_KEY.encode() in got[0]
                # --token-env: the client's token never went upstream (the upstream echoes all it gets).
                assert not any(CLIENT_TOKEN.encode() in g for g in got)
                await client.close()
                wrong = AsyncOpenAI(base_url=url + "/v1", api_key="not-the-token-123", max_retries=0, timeout=30)
                with pytest.raises(openai.AuthenticationError) as refused:
                    await wrong.models.list()
                errors.append(refused.value.response.content)
                await wrong.close()
            else:
                basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
                for auth in (f"Basic {basic}", f"bearer {LOWER_BEARER}", f"Token {TOKEN_SCHEME}"):
                    client = AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=30)
                    headers = {**extra["extra_headers"], "Authorization": auth}
                    got = await chats(client, **{**extra, "extra_headers": headers})
                    assert PASSWORD.encode() in got[0] or auth.split()[1].encode() in got[0]
                    await client.close()
            # A header value with a control character: the parser refuses it, and must not quote it anywhere.
            bad = await raw_request(
                url,
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                + f"Authorization: Bearer {CTL_KEY}\x01x\r\n".encode()
                + b"Content-Length: 2\r\n\r\n{}",
            )
            errors.append(bad)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0
    finally:
        await runner.cleanup()

    found = artifacts(cassette, tmp_path, capsys)
    found["proxy stdout"] = b"".join(start_lines) + stdout
    found["proxy stderr (its log)"] = stderr
    found["proxy error bodies"] = b"".join(errors)
    counts = {name: sum(leaks(blob, s) for s in SECRETS) for name, blob in found.items()}
    print(f"\nsecrets found per artifact ({keys}): {counts}")
    assert counts == dict.fromkeys(found, 0)
    assert b" 400 " in bad.split(b"\r\n")[0] and b'"code": "bad_request"' in bad
    assert b"malformed request" in stderr and b"Traceback" not in stderr  # logged, in one line
    records = read_cassette(cassette)[1]
    assert len(records) == (len(MODELS) * 2 + 1) * (1 if keys == "proxy keys" else 3)
    # Compressed exchanges are scored like plain ones: complete, with a model and, streamed, a first token.
    for record in records:
        if record.response.status == 200:
            assert record.outcome == "complete", record.id
            assert record.upstream.model in MODELS
            if record.response.streamed:
                assert record.timing.first_token is not None
