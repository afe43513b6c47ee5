"""Exchange records for tests: built from a nested map as a test would write it, typed as the cassette's struct."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from bench.core.cassette.records import Exchange, Request
from bench.proxy import recorder


def exchange(fields: Mapping[str, Any] | None = None, /, **more: Any) -> Exchange:
    """An exchange record from a map of its fields (docs/cassette-format.md), e.g.
    `exchange(request={"body": b"{}"}, response={"status": 200, "chunks": [b"x"]})`; fields left out take their
    defaults. A field of the wrong type fails here, as it would in a cassette."""
    data = {k: v for k, v in {**(fields or {}), **more}.items() if k != "kind"}
    return msgspec.convert(data, Exchange)


def as_map(record: Exchange) -> dict[str, Any]:
    """The record as nested maps, every field present (for tests that compare or edit records as data)."""
    out: dict[str, Any] = msgspec.structs.asdict(record)
    for key, value in out.items():
        if isinstance(value, msgspec.Struct):
            out[key] = msgspec.structs.asdict(value)
    return out


def live_exchange(t0: int, **fields: Any) -> recorder.Exchange:
    """The proxy's in-flight exchange of a POST to /v1/chat/completions started at `t0` (monotonic ns), with nothing
    read yet; `fields` replace its defaults: its request's (`body`, `fp`, `headers`, ...) or its own (`upstream_url`,
    `started_us`, ...)."""
    asked = {k: fields.pop(k) for k in list(fields) if k in Request.__struct_fields__}
    request = Request(**({"method": "POST", "path": "/v1/chat/completions", "body": b"{}"} | asked))
    start: dict[str, Any] = {"started_us": 0, "mode": "record", "tags": {}, "upstream_url": None}
    return recorder.Exchange(t0=t0, request=request, **(start | fields))
