"""The mode registry (bench.proxy.modes): a mode's constructor declares which side it answers from, and the proxy
builds that side only."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bench.core.cassette import read_cassette
from bench.proxy import modes, start_proxy
from bench.proxy.forward import Upstream
from bench.proxy.modes import Mode, mode
from bench.proxy.modes.auto import Auto
from bench.proxy.modes.passthrough import Passthrough
from bench.proxy.modes.record import Record
from bench.proxy.modes.replay import Replay
from bench.proxy.recorder import Exchange
from tests.support.upstream import Upstream as MockUpstream


def test_the_shipped_modes_declare_their_sides_in_their_constructors() -> None:
    declared = {cls.name: (cls.needs, cls.forwards, cls.replays) for cls in (Record, Replay, Auto, Passthrough)}
    assert declared == {
        "record": (("upstream",), True, False),
        "replay": (("recordings",), False, True),
        "auto": (("upstream", "recordings"), True, True),
        "passthrough": (("upstream",), True, False),
    }
    assert list(modes.MODES) == ["record", "replay", "auto", "passthrough"]  # `--mode`'s order


def test_a_mode_asking_for_anything_else_is_refused_when_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modes, "MODES", dict(modes.MODES))
    with pytest.raises(TypeError, match="may take upstream and recordings, not state"):

        @mode("nosy")
        class Nosy(Mode):
            recorded_as = "nosy"

            def __init__(self, upstream: Upstream, state: object) -> None:
                self.upstream = upstream

            def respond(self, request: web.BaseRequest, ex: Exchange) -> Awaitable[web.StreamResponse]:
                return self.upstream.forward(request, ex)

    assert "nosy" not in modes.MODES


async def test_a_new_mode_is_one_class_and_gets_only_what_it_asks_for(
    monkeypatch: pytest.MonkeyPatch, upstream: MockUpstream, cassettes: Path
) -> None:
    monkeypatch.setattr(modes, "MODES", dict(modes.MODES))
    built: list[Upstream] = []

    @mode("relay")
    class Relay(Mode):
        recorded_as = "relay"
        cassette_prefix = "relay"

        def __init__(self, upstream: Upstream) -> None:
            built.append(upstream)
            self.upstream = upstream

        def respond(self, request: web.BaseRequest, ex: Exchange) -> Awaitable[web.StreamResponse]:
            return self.upstream.forward(request, ex)

    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, mode="relay")
    body = {"model": "test-model", "messages": [{"role": "user", "content": "Say something."}]}
    async with aiohttp.ClientSession() as client, client.post(f"{proxy.url}/v1/chat/completions", json=body) as r:
        answer = await r.json()
        status = r.status
    await proxy.close()
    assert status == 200 and answer["object"] == "chat.completion"
    # An upstream side and no recordings (nothing was loaded for it), and its records carry its name.
    assert len(built) == 1 and isinstance(built[0], Upstream) and proxy.index is None
    assert proxy.cassette_path is not None and proxy.cassette_path.name.startswith("relay-")
    [record] = read_cassette(proxy.cassette_path)[1]
    assert (record.mode, record.response.status, record.outcome) == ("relay", 200, "complete")
