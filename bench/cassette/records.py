"""The cassette header's typed parts (docs/cassette-format.md): how the writing proxy was set up and the run it served.

The header is still written and read as a map (bench.cassette.writer/reader); these structs are what the scorer
takes out of it (`header.settings`, `header.run`) into the scores file's meta line, so their fields are the format
(a test checks them against the documented tables). A part whose values have other types is a damaged header.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

_P = TypeVar("_P", bound=msgspec.Struct)


# gc=False: a record holds only strings, numbers, bytes and other record parts, so it is never part of a reference
# cycle; untracked, the thousands decoded per rescore cost the cyclic collector nothing.
class MatchSettings(msgspec.Struct, gc=False):
    """How a replay matched requests to recordings (proxy.matching.MatchOptions)."""

    strict: bool = True
    ignore: list[str] = msgspec.field(default_factory=list)
    tool_call_ids: bool = False
    blank: list[str] = msgspec.field(default_factory=list)


class Settings(msgspec.Struct, gc=False):
    """`header.settings`: how the proxy that wrote the cassette was set up (never a key: only whether one was set)."""

    upstream: str | None = None
    mode: str | None = None
    pace: str | None = None
    listen: str | None = None
    upstream_key: bool = False
    client_token: bool = False
    # Seconds as given (an int stays an int).
    request_timeout: int | float | None = None
    idle_timeout: int | float | None = None
    replay_sources: int = 0
    # Absent (not null) in cassettes written before it existed: UNSET keeps them reading, and re-encoding, the same.
    match: MatchSettings | msgspec.UnsetType | None = msgspec.UNSET


class RunMeta(msgspec.Struct, gc=False):
    """`header.run`: the run that the recording driver (`bench record`) was making; empty for a bare proxy."""

    id: str | None = None
    driver: str | None = None
    # The driver's options as it shows them to users (catalog.driver.config.RecordConfig.public(), no key): kept
    # verbatim, read back only by `bench record --resume` to take the options over.
    config: dict[str, Any] | None = None
    catalog_hash: str | None = None
    tests: dict[str, str] | None = None  # test id -> the test's hash when recorded (staleness)
    bench_version: str | None = None
    started: str | None = None
    resumed_from: list[str] | None = None
    # Written by the pytest plugin (proxy.pytest_plugin) only, absent otherwise (UNSET: other headers read and
    # re-encode as they were).
    source: str | msgspec.UnsetType = msgspec.UNSET  # "pytest"
    test: str | msgspec.UnsetType = msgspec.UNSET  # the pytest node id that recorded the cassette
    session: str | msgspec.UnsetType = msgspec.UNSET  # the pytest session that wrote it
    depends_on: dict[str, str] | msgspec.UnsetType = msgspec.UNSET  # file -> its hash when recorded
    first_recorded_us: int | msgspec.UnsetType = msgspec.UNSET  # a merged cassette: its oldest recording's time


class DamagedHeader(ValueError):
    """A header part that is not a map of the documented fields and types."""


def header_settings(header: dict[str, Any]) -> Settings:
    return _part(header, "settings", Settings)


def header_run(header: dict[str, Any]) -> RunMeta:
    return _part(header, "run", RunMeta)


def _part(header: dict[str, Any], key: str, kind: type[_P]) -> _P:
    try:
        return msgspec.convert(header.get(key) or {}, kind)
    except msgspec.ValidationError as exc:
        raise DamagedHeader(f"header.{key}: {exc}") from None
