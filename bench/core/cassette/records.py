"""The cassette's records as typed structs: header, exchange and end (docs/cassette-format.md, whose tables a
test checks against them).

The writer encodes these structs and the reader decodes into them, so the field names and types below are the
format. Defaults are what a reader assumes for a field an older or partial record lacks.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from bench.core.cassette.format import END, EXCHANGE, FORMAT_NAME, FORMAT_VERSION, HEADER, PART

_P = TypeVar("_P", bound=msgspec.Struct)


# gc=False: a record holds only strings, numbers, bytes and other record parts, so it is never part of a reference
# cycle; untracked, the thousands decoded per rescore cost the cyclic collector nothing.
class MatchSettings(msgspec.Struct, gc=False):
    """How a replay matched requests to recordings (bench.proxy.matching.MatchOptions)."""

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
    # The driver's options as it shows them to users (bench.catalog.driver.config.RecordConfig.public(), no key): kept
    # verbatim, read back only by `bench record --resume` to take the options over.
    config: dict[str, Any] | None = None
    catalog_hash: str | None = None
    tests: dict[str, str] | None = None  # test id -> the test's hash when recorded (staleness)
    bench_version: str | None = None
    started: str | None = None
    resumed_from: list[str] | None = None
    # Written by the pytest plugin (bench.proxy.pytest_plugin) only, absent otherwise (UNSET: other headers read and
    # re-encode as they were).
    source: str | msgspec.UnsetType = msgspec.UNSET  # "pytest"
    test: str | msgspec.UnsetType = msgspec.UNSET  # the pytest node id that recorded the cassette
    session: str | msgspec.UnsetType = msgspec.UNSET  # the pytest session that wrote it
    depends_on: dict[str, str] | msgspec.UnsetType = msgspec.UNSET  # file -> its hash when recorded
    first_recorded_us: int | msgspec.UnsetType = msgspec.UNSET  # a merged cassette: its oldest recording's time


class ServedModel(msgspec.Struct, omit_defaults=True, gc=False):
    """One model as the serving engine describes it (`header.server.models[]`); a field the engine does not say is
    left out (None)."""

    id: str = ""
    context_length: int | None = None  # tokens per request the server was started with (n_ctx, max_model_len)
    trained_context: int | None = None  # the model's own context length (n_ctx_train, <arch>.context_length)
    quantization: str | None = None  # Q4_K_M, Q8_0, F16...; from the engine, else from the model file's name
    parameters: str | None = None  # parameter count as the engine says it (8.0B, 134515008)
    family: str | None = None
    format: str | None = None  # gguf, safetensors...
    file: str | None = None  # the model file or directory's last path component (never the whole path)
    kv_cache_type: str | None = None  # where the engine says it


class ServerInfo(msgspec.Struct, omit_defaults=True, gc=False):
    """`header.server`: what served the run, read at record time from the engine's own endpoints (`/props`,
    `/v1/models`, `/version`, `/api/show`, ...; docs/record.md, "What was run, on what")."""

    engine: str | None = None  # llama.cpp, llama-cpp-python, vllm, ollama; None when not recognised
    version: str | None = None
    slots: int | None = None  # requests the server runs at once (llama.cpp's total_slots)
    sources: list[str] = msgspec.field(default_factory=list)  # the endpoints that answered, e.g. "GET /props"
    models: list[ServedModel] = msgspec.field(default_factory=list)


class Header(msgspec.Struct, tag_field="kind", tag=HEADER, gc=False):
    """The first record: what wrote the cassette, when, how the proxy was set up and for which run."""

    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION
    bench_version: str = ""
    fingerprint_version: int = 0
    created: str = ""
    created_us: int = 0
    settings: Settings = msgspec.field(default_factory=Settings)
    run: RunMeta = msgspec.field(default_factory=RunMeta)
    # Written by `bench record` (and absent, UNSET, from cassettes written before it or by a bare proxy).
    server: ServerInfo | msgspec.UnsetType = msgspec.UNSET


class End(msgspec.Struct, tag_field="kind", tag=END, gc=False):
    """The last record, written when the cassette is closed cleanly. The fields after `queue_full_waits` are
    `bench proxy`'s own counters, absent (UNSET) from cassettes closed by other writers."""

    closed: str = ""
    exchanges: int = 0
    queue_full_waits: int = 0
    interrupted: bool | msgspec.UnsetType = msgspec.UNSET
    cut_by_shutdown: int | msgspec.UnsetType = msgspec.UNSET
    errors: int | msgspec.UnsetType = msgspec.UNSET
    replayed: int | msgspec.UnsetType = msgspec.UNSET
    misses: int | msgspec.UnsetType = msgspec.UNSET
    client_disconnects: int | msgspec.UnsetType = msgspec.UNSET


# -- the exchange record ---------------------------------------------------------------------------------------------
# omit_defaults: a field at its default is left out of the file and read back as that default. Most exchanges have
# no error, no replay source, no redactions and no cut: leaving those out keeps every record smaller.


class Request(msgspec.Struct, omit_defaults=True, gc=False):
    method: str = ""
    path: str = ""
    query: str = ""
    headers: list[list[str]] = msgspec.field(default_factory=list)
    body: bytes = b""
    fp: str = ""


class Response(msgspec.Struct, omit_defaults=True, gc=False):
    status: int | None = None
    headers: list[list[str]] = msgspec.field(default_factory=list)
    chunks: list[bytes] = msgspec.field(default_factory=list)
    # Stored as the payload's time column, not in the map (bench.core.cassette.columns): the reader puts it back here.
    chunk_us: list[int] = msgspec.field(default_factory=list)
    streamed: bool = False
    raw_bytes: int = 0
    cut: bool = False
    # On disk only: the sequence numbers of the part records holding this body's first reads, in order. Readers put
    # those reads (and their times) in front of `chunks` and leave this empty, so a record read can be written again.
    parts: list[int] = msgspec.field(default_factory=list)


class Timing(msgspec.Struct, omit_defaults=True, gc=False):
    sent_upstream: int | None = None
    headers: int | None = None
    first_byte: int | None = None
    first_token: int | None = None
    end: int = 0
    proxy_us: int = 0
    loop_lag_us: int | None = None


class Upstream(msgspec.Struct, omit_defaults=True, gc=False):
    url: str | None = None
    system_fingerprint: str | None = None
    model: str | None = None
    server: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class ReplayOf(msgspec.Struct, gc=False):
    """The recorded exchange a replay served."""

    cassette: str = ""
    id: str = ""


class Exchange(msgspec.Struct, tag_field="kind", tag=EXCHANGE, omit_defaults=True, gc=False):
    """One request and its response (the bulk of every cassette)."""

    id: str = ""
    started: int = 0
    mode: str = ""
    request: Request = msgspec.field(default_factory=Request)
    response: Response = msgspec.field(default_factory=Response)
    timing: Timing = msgspec.field(default_factory=Timing)
    upstream: Upstream = msgspec.field(default_factory=Upstream)
    outcome: str = "complete"
    error: str | None = None
    tags: dict[str, str] = msgspec.field(default_factory=dict)
    replay_of: ReplayOf | None = None
    redacted: list[str] = msgspec.field(default_factory=list)


class Part(msgspec.Struct, tag_field="kind", tag=PART, omit_defaults=True, gc=False):
    """Reads of a large response body written while its exchange was still running (the proxy's spill): the
    exchange record that ends it lists the parts' sequence numbers in `response.parts`."""

    started: int = 0  # the exchange's `started`: names an exchange that never ended
    n: int = 0  # its place among the parts of its exchange, from 0
    chunks: list[bytes] = msgspec.field(default_factory=list)
    # Continues the exchange's delta chain (the first from t0 only in part 0); stored as the payload's time column.
    chunk_us: list[int] = msgspec.field(default_factory=list)


class DamagedRecord(ValueError):
    """A map that is not a valid record of its kind (fields of other types)."""


_ENCODER = msgspec.msgpack.Encoder()


def encode(record: Header | Exchange | End) -> bytes:
    return _ENCODER.encode(record)


def encode_exchange(record: Exchange) -> tuple[bytes, list[int]]:
    """An exchange packed without its arrival times, and the times: v2 stores them as the payload's column
    (bench.core.cassette.columns), which the writer's thread builds. An empty `chunk_us` is the field's default, left
    out of the map."""
    response = record.response
    times = response.chunk_us
    response.chunk_us = []
    try:
        return _ENCODER.encode(record), times
    finally:
        response.chunk_us = times  # the caller's record is left as it was


def encode_part(part: Part) -> tuple[bytes, list[int]]:
    """A part packed without its arrival times, and the times (the column, as for an exchange)."""
    times = part.chunk_us
    part.chunk_us = []
    try:
        return _ENCODER.encode(part), times
    finally:
        part.chunk_us = times


def from_map(kind: type[_P], value: Any) -> _P:
    """A record from the map msgpack read (readers unpack a stream of records); DamagedRecord if it does not fit."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise DamagedRecord(str(exc)) from None
