"""The cassette's records as typed structs: header, exchange and end (docs/cassette-format.md, whose tables a
test checks against them).

The writer encodes these structs and the reader decodes into them, so the field names and types below are the
format. Defaults are what a reader assumes for a field an older or partial record lacks.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec

from bench.core.cassette.format import END, EXCHANGE, FORMAT_NAME, FORMAT_VERSION, HEADER, PART

_P = TypeVar("_P", bound=msgspec.Struct)

# -- bounds -----------------------------------------------------------------------------------------------------------
# Every value is range-checked as it is decoded (docs/cassette-format.md, "Bounds"): a record holding a value outside
# them is damage, skipped and counted like any other malformed record, so no reader downstream meets a time past the
# year 9999, a negative count or a megabyte-long model name.
MAX_TIME_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z, the last instant `datetime` can hold
MAX_SPAN_US = 30 * 86_400 * 1_000_000  # a time inside one exchange, from its start (30 days)
MAX_COUNT = 1 << 53  # counters and byte counts (exact in a float, as JSON readers hold them)
MAX_NAME = 4096  # ids, tags, model names, header values of bench's own records: characters
MAX_TEXT = 1 << 16  # an error message, a request path or query, an HTTP header value: characters

Epoch = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIME_US)]
Span = Annotated[int, msgspec.Meta(ge=0, le=MAX_SPAN_US)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_SPAN_US / 1e6)]


# gc=False: a record holds only strings, numbers, bytes and other record parts, so it is never part of a reference
# cycle; untracked, the thousands decoded per rescore cost the cyclic collector nothing.
class MatchSettings(msgspec.Struct, gc=False):
    """How a replay matched requests to recordings (bench.proxy.matching.MatchOptions)."""

    strict: bool = True
    ignore: list[Text] = msgspec.field(default_factory=list)
    tool_call_ids: bool = False
    blank: list[Text] = msgspec.field(default_factory=list)


class Settings(msgspec.Struct, gc=False):
    """`header.settings`: how the proxy that wrote the cassette was set up (never a key: only whether one was set)."""

    upstream: Text | None = None
    mode: Name | None = None
    pace: Name | None = None
    listen: Name | None = None
    upstream_key: bool = False
    client_token: bool = False
    # Seconds as given (an int stays an int).
    request_timeout: Count | Seconds | None = None
    idle_timeout: Count | Seconds | None = None
    replay_sources: Count = 0
    # Absent (not null) in cassettes written before it existed: UNSET keeps them reading, and re-encoding, the same.
    match: MatchSettings | msgspec.UnsetType | None = msgspec.UNSET


class LoadMeta(msgspec.Struct, gc=False):
    """`header.run.load`: how `bench load` loaded the upstream (docs/load.md). Each exchange names its level in its
    tags (`level`, `load`, `phase`, and `at`, `late` for scheduled arrivals); this says what the run as a whole was."""

    workload: Name = ""  # where the requests came from: catalog, synthetic, dataset, replay (or a plugged-in source)
    source: Text | None = None  # the dataset file, the replayed cassettes, the synthetic lengths, as given
    arrival: Name = ""  # constant, poisson, gamma, replay, or closed (fixed concurrency)
    burstiness: float | None = None  # gamma shape (1: Poisson)
    levels: Text = ""  # the levels as asked: "sweep 6", "rate 1,2,4", "concurrency 1,4,16", "replay x2"
    duration_s: Seconds | None = None  # each level's length, or
    requests: Count | None = None  # each level's request count
    warmup: Name | None = None  # excluded from each level's figures at its start ("10%", "2s")
    cooldown: Name | None = None  # and at its end
    max_concurrency: Count | None = None  # requests in flight at most (open-loop arrivals wait for a slot beyond it)
    seed: int | None = None  # arrivals and sampling are reproducible from it
    # The SLO the run was meant for (metric -> ms), the report's default; `bench report --slo` overrides it.
    slo: dict[Name, float] = msgspec.field(default_factory=dict)


class RunMeta(msgspec.Struct, gc=False):
    """`header.run`: the run that the recording driver (`bench record`) was making; empty for a bare proxy."""

    id: Name | None = None
    driver: Name | None = None
    # The driver's options as it shows them to users (bench.catalog.driver.config.RecordConfig.public(), no key): kept
    # verbatim, read back only by `bench record --resume` to take the options over.
    config: dict[str, Any] | None = None
    catalog_hash: Name | None = None
    tests: dict[Name, Name] | None = None  # test id -> the test's hash when recorded (staleness)
    bench_version: Name | None = None
    started: Name | None = None
    resumed_from: list[Text] | None = None
    # Written by the pytest plugin (bench.proxy.pytest_plugin) only, absent otherwise (UNSET: other headers read and
    # re-encode as they were).
    source: Name | msgspec.UnsetType = msgspec.UNSET  # "pytest"
    test: Text | msgspec.UnsetType = msgspec.UNSET  # the pytest node id that recorded the cassette
    session: Name | msgspec.UnsetType = msgspec.UNSET  # the pytest session that wrote it
    depends_on: dict[Text, Name] | msgspec.UnsetType = msgspec.UNSET  # file -> its hash when recorded
    first_recorded_us: Epoch | msgspec.UnsetType = msgspec.UNSET  # a merged cassette: its oldest recording's time
    # Written by `bench load` only, absent otherwise.
    load: LoadMeta | msgspec.UnsetType = msgspec.UNSET


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


class Shard(msgspec.Struct, gc=False):
    """`header.shard`: one worker's part of a run recorded by `bench proxy --workers N` (each worker records into its
    own cassettes). Readers treat every cassette naming the same `run` as one run, its exchanges in start order."""

    run: Name = ""  # the run's name, the same in each of its shards (its cassettes' names begin with it)
    index: Count = 0  # the worker, 0 to count - 1
    count: Count = 1  # workers that recorded the run


class Header(msgspec.Struct, tag_field="kind", tag=HEADER, gc=False):
    """The first record: what wrote the cassette, when, how the proxy was set up and for which run."""

    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION
    bench_version: Name = ""
    fingerprint_version: Count = 0
    created: Name = ""
    created_us: Epoch = 0
    settings: Settings = msgspec.field(default_factory=Settings)
    run: RunMeta = msgspec.field(default_factory=RunMeta)
    # Written by `bench record` (and absent, UNSET, from cassettes written before it or by a bare proxy).
    server: ServerInfo | msgspec.UnsetType = msgspec.UNSET
    # Written by `bench proxy --workers N` (N > 1) only; absent (UNSET), a cassette is a run of its own.
    shard: Shard | msgspec.UnsetType = msgspec.UNSET


class End(msgspec.Struct, tag_field="kind", tag=END, gc=False):
    """The last record, written when the cassette is closed cleanly. The fields after `queue_full_waits` are
    `bench proxy`'s own counters, absent (UNSET) from cassettes closed by other writers."""

    closed: Name = ""
    exchanges: Count = 0
    queue_full_waits: Count = 0
    interrupted: bool | msgspec.UnsetType = msgspec.UNSET
    cut_by_shutdown: Count | msgspec.UnsetType = msgspec.UNSET
    errors: Count | msgspec.UnsetType = msgspec.UNSET
    replayed: Count | msgspec.UnsetType = msgspec.UNSET
    misses: Count | msgspec.UnsetType = msgspec.UNSET
    client_disconnects: Count | msgspec.UnsetType = msgspec.UNSET


# -- the exchange record ---------------------------------------------------------------------------------------------
# omit_defaults: a field at its default is left out of the file and read back as that default. Most exchanges have
# no error, no replay source, no redactions and no cut: leaving those out keeps every record smaller.


class Request(msgspec.Struct, omit_defaults=True, gc=False):
    method: Name = ""
    path: Text = ""
    query: Text = ""
    headers: list[list[Text]] = msgspec.field(default_factory=list)
    body: bytes = b""
    fp: Name = ""


class Response(msgspec.Struct, omit_defaults=True, gc=False):
    status: Annotated[int, msgspec.Meta(ge=0, le=999)] | None = None
    headers: list[list[Text]] = msgspec.field(default_factory=list)
    chunks: list[bytes] = msgspec.field(default_factory=list)
    # Stored as the payload's time column, not in the map (bench.core.cassette.columns): the reader puts it back here.
    chunk_us: list[Span] = msgspec.field(default_factory=list)
    streamed: bool = False
    raw_bytes: Count = 0
    cut: bool = False
    # On disk only: the sequence numbers of the part records holding this body's first reads, in order. Readers put
    # those reads (and their times) in front of `chunks` and leave this empty, so a record read can be written again.
    parts: list[Count] = msgspec.field(default_factory=list)


class Timing(msgspec.Struct, omit_defaults=True, gc=False):
    sent_upstream: Span | None = None
    headers: Span | None = None
    first_byte: Span | None = None
    first_token: Span | None = None
    end: Span = 0
    proxy_us: Span = 0
    loop_lag_us: Span | None = None


class Upstream(msgspec.Struct, omit_defaults=True, gc=False):
    url: Text | None = None
    system_fingerprint: Name | None = None
    model: Name | None = None
    server: Name | None = None
    headers: dict[Name, Text] = msgspec.field(default_factory=dict)


class ReplayOf(msgspec.Struct, gc=False):
    """The recorded exchange a replay served."""

    cassette: Text = ""
    id: Name = ""


class Exchange(msgspec.Struct, tag_field="kind", tag=EXCHANGE, omit_defaults=True, gc=False):
    """One request and its response (the bulk of every cassette)."""

    id: Name = ""
    started: Epoch = 0
    mode: Name = ""
    request: Request = msgspec.field(default_factory=Request)
    response: Response = msgspec.field(default_factory=Response)
    timing: Timing = msgspec.field(default_factory=Timing)
    upstream: Upstream = msgspec.field(default_factory=Upstream)
    outcome: Name = "complete"
    error: Text | None = None
    tags: dict[Name, Name] = msgspec.field(default_factory=dict)
    replay_of: ReplayOf | None = None
    redacted: list[Name] = msgspec.field(default_factory=list)


class Part(msgspec.Struct, tag_field="kind", tag=PART, omit_defaults=True, gc=False):
    """Reads of a large response body written while its exchange was still running (the proxy's spill): the
    exchange record that ends it lists the parts' sequence numbers in `response.parts`."""

    started: Epoch = 0  # the exchange's `started`: names an exchange that never ended
    n: Count = 0  # its place among the parts of its exchange, from 0
    chunks: list[bytes] = msgspec.field(default_factory=list)
    # Continues the exchange's delta chain (the first from t0 only in part 0); stored as the payload's time column.
    chunk_us: list[Span] = msgspec.field(default_factory=list)


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
    except RecursionError:
        raise DamagedRecord("nested too deep to decode") from None
