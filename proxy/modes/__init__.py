"""The proxy's modes, one small class each behind one interface, chosen once at start by name (`get`).

A mode says what the proxy needs at start (an upstream session, the recordings, a cassette to write) and answers
each request (`respond`) once the app has authenticated it, read its body and begun its exchange. Adding a mode is
one module here with a `@mode("name")` class, imported below; `bench proxy --mode` offers every registered name.

The modules import aiohttp's side of the proxy when a mode is chosen (`get` makes its instance), not at the top: the CLI
lists the modes' names for `bench --help`, which must not load aiohttp. Not in `respond` either: an import statement
run per request costs ~3 us of the handler's start even when the module is loaded.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bench.core.errors import BenchError

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.recorder import Exchange
    from bench.proxy.recordings import ReplayIndex
    from bench.proxy.state import ProxyState


class Mode(ABC):
    """One way of answering requests. Instances hold no per-request state: one serves every request of a proxy."""

    name: ClassVar[str]
    recorded_as: ClassVar[str]  # the `mode` of the exchange records it writes (docs/cassette-format.md)
    forwards: ClassVar[bool] = True  # opens an upstream session, so needs an upstream URL
    replays: ClassVar[bool] = False  # loads the recordings in the cassette folder at start
    records: ClassVar[bool] = True  # writes a cassette
    cassette_prefix: ClassVar[str] = "rec"  # a new cassette's file name begins with this

    def check(self, index: ReplayIndex | None, cassettes: Path) -> None:
        """Refuse to start (BenchError) when this mode cannot answer anything with what was loaded."""
        return None  # every mode but replay can start with no recordings

    def writes_cassette(self, replay_log: bool) -> bool:
        """Whether this proxy writes a cassette; `replay_log=False` asks a replaying proxy to write none."""
        return self.records

    @abstractmethod
    async def respond(self, request: web.BaseRequest, state: ProxyState, ex: Exchange) -> web.StreamResponse:
        """Answer a request whose exchange has begun; the app finishes the exchange whatever happens."""


MODES: dict[str, type[Mode]] = {}


def mode(name: str) -> Callable[[type[Mode]], type[Mode]]:
    """Register a mode class under `name` (what `--mode` and `start_proxy(mode=...)` take)."""

    def register(cls: type[Mode]) -> type[Mode]:
        cls.name = name
        MODES[name] = cls
        return cls

    return register


def get(name: str) -> Mode:
    """The mode registered as `name`, or a one-line error naming the choices."""
    cls = MODES.get(name)
    if cls is None:
        raise BenchError(f"bad mode {name!r}; use one of {', '.join(MODES)}")
    return cls()


# Registration, in the order `--help` lists them.
from bench.proxy.modes import record, replay, auto, passthrough  # noqa: E402, F401, I001
