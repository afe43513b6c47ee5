"""Promises of docs/scale.md about a rotating proxy that no other test held: a rotating series is named
`rec-STAMP-PID-00000.cassette`, `-00001`, ..., and the names sort in recording order."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

from bench.core.cassette import CassetteReader
from tests.bench.cli.test_proxy_command import post
from tests.proxy.test_rotation import rotating_proxy
from tests.support.upstream import Upstream


async def test_rotated_cassettes_are_numbered_in_recording_order(upstream: Upstream, tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    sent = []
    async with (
        rotating_proxy("--upstream", upstream.url, "--cassettes", str(folder), "--rotate-size", "1") as proxy,
        aiohttp.ClientSession() as session,
    ):
        first = Path(proxy.lines[-1].split()[-1])  # "bench proxy: writing PATH"
        for words in (2, 3):
            sent.append(await post(session, proxy.url, x_words=words))
            await proxy.line(r"closed ")
        rc, _, err = await proxy.stop()
    assert rc == 0, err
    names = sorted(p.name for p in folder.glob("*.cassette"))
    stem = re.fullmatch(r"(rec-\d{8}T\d{6}-\d+)-00000\.cassette", first.name)
    assert stem is not None, first.name
    assert names[: len(sent) + 1] == [f"{stem[1]}-{n:05d}.cassette" for n in range(len(sent) + 1)]
    bodies = [b"".join(r.response.chunks) for name in names for r in CassetteReader(folder / name)]
    assert bodies == sent  # names sort in recording order
