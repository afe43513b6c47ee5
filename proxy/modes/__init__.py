"""The proxy's modes, one small class each behind one method, chosen once at start by name (`get`).

A mode decides who answers each request (`respond`), once the app has authenticated it, read its body and begun its
exchange: the upstream (bench.proxy.forward.Upstream) or the recordings (bench.proxy.playback.Playback). Its
constructor's parameters declare which it needs, by name: `upstream`, `recordings`, or both; the proxy sets up only
those (an upstream session, the recordings loaded at start) and hands them over, and nothing else. Adding a mode is
one module here with a `@mode("name")` class, imported below; `bench proxy --mode` offers every registered name.

The modules import no aiohttp (their annotations only name the two sides): the CLI lists the modes' names for
`bench --help`, which must not load it.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bench.core.errors import BenchError

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.forward import Upstream
    from bench.proxy.playback import Playback
    from bench.proxy.recorder import Exchange
    from bench.proxy.recordings import ReplayIndex

# What a mode's constructor may ask for, by parameter name.
SIDES = ("upstream", "recordings")


class Mode(ABC):
    """One way of answering requests. Instances hold no per-request state: one serves every request of a proxy."""

    name: ClassVar[str]
    recorded_as: ClassVar[str]  # the `mode` of the exchange records it writes (docs/cassette-format.md)
    # Set by `mode` from the constructor's parameters: what it needs, by name (SIDES); `forwards` (it takes
    # `upstream`: it needs an upstream URL and opens a session) and `replays` (it takes `recordings`: the cassette
    # folder is loaded at start) say the same.
    needs: ClassVar[tuple[str, ...]] = ()
    forwards: ClassVar[bool] = False
    replays: ClassVar[bool] = False
    records: ClassVar[bool] = True  # writes a cassette
    cassette_prefix: ClassVar[str] = "rec"  # a new cassette's file name begins with this

    @classmethod
    def check(cls, index: ReplayIndex | None, cassettes: Path) -> None:
        """Refuse to start (BenchError) when this mode cannot answer anything with what was loaded."""
        return None  # every mode but replay can start with no recordings

    @classmethod
    def writes_cassette(cls, replay_log: bool) -> bool:
        """Whether this proxy writes a cassette; `replay_log=False` asks a replaying proxy to write none."""
        return cls.records

    @abstractmethod
    def respond(self, request: web.BaseRequest, ex: Exchange) -> Awaitable[web.StreamResponse]:
        """The answer to await for a request whose exchange has begun (the app finishes the exchange whatever
        happens): the upstream's `forward(...)` or the recordings' `serve(...)`/`miss(...)`. A plain method, not a
        coroutine: it picks the answer and adds no frame of its own to each resumption of a streamed answer."""


MODES: dict[str, type[Mode]] = {}


def mode(name: str) -> Callable[[type[Mode]], type[Mode]]:
    """Register a mode class under `name` (what `--mode` and `start_proxy(mode=...)` take); its constructor's
    parameters say what it needs (SIDES)."""

    def register(cls: type[Mode]) -> type[Mode]:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # after self
        needs = tuple(p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
        unknown = sorted(set(needs) - set(SIDES))
        if unknown:
            raise TypeError(f"mode {name!r}: its constructor may take {' and '.join(SIDES)}, not {', '.join(unknown)}")
        cls.name = name
        cls.needs = needs
        cls.forwards = "upstream" in needs
        cls.replays = "recordings" in needs
        MODES[name] = cls
        return cls

    return register


def get(name: str) -> type[Mode]:
    """The mode registered as `name`, or a one-line error naming the choices."""
    cls = MODES.get(name)
    if cls is None:
        raise BenchError(f"bad mode {name!r}; use one of {', '.join(MODES)}")
    return cls


def build(cls: type[Mode], upstream: Upstream | None, recordings: Playback | None) -> Mode:
    """An instance of `cls`, given what its constructor asks for (and nothing else)."""
    given = {"upstream": upstream, "recordings": recordings}
    missing = [side for side in cls.needs if given[side] is None]
    if missing:
        raise RuntimeError(f"mode {cls.name!r} needs {' and '.join(missing)}")
    return cls(**{side: given[side] for side in cls.needs})


# Registration, in the order `--help` lists them.
from bench.proxy.modes import record, replay, auto, passthrough  # noqa: E402, F401, I001
