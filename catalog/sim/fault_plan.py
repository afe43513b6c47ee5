"""Transport faults, chosen by model name (`oracle+429`, `flawed-no-call+500!`) or per request (`X-Sim-Fault`).

A fault in a model name hits the first attempt of each distinct request: `oracle+500+truncate` answers a given
request with a 500, then its retry with a truncated stream, then normally, so a driver's retries are exercised
without failing the run. A trailing `!` makes a fault hit every request; `X-Sim-Fault` faults always apply.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from bench.core.errors import BenchError
from bench.core.fingerprint import VOLATILE_FIELDS

HTTP_FAULTS = {"429": 429, "408": 408, "500": 500, "502": 502, "503": 503}
STREAM_FAULTS = ("truncate", "stall", "empty")
FAULT_KINDS = (*HTTP_FAULTS, *STREAM_FAULTS)


@dataclass(frozen=True)
class Fault:
    kind: str
    # An HTTP status: its Retry-After seconds; stall: seconds of silence (default: until the client gives up).
    param: float | None = None
    always: bool = False

    @property
    def status(self) -> int | None:
        return HTTP_FAULTS.get(self.kind)


def parse_fault(token: str) -> Fault:
    always = token.endswith("!")
    token = token.rstrip("!")
    kind, _, param = token.partition(":")
    if kind not in FAULT_KINDS:
        raise BenchError(f"unknown simulator fault {kind!r}; use one of {', '.join(FAULT_KINDS)}")
    try:
        value = float(param) if param else None
    except ValueError:
        raise BenchError(f"bad simulator fault parameter {token!r}; write e.g. 429:2 or stall:30") from None
    return Fault(kind, value, always)


def split_model(name: str) -> tuple[str, tuple[Fault, ...]]:
    """`oracle+500+truncate` -> ("oracle", faults)."""
    base, *tokens = name.split("+")
    return base, tuple(parse_fault(t) for t in tokens if t)


def request_key(model: str, body: Mapping[str, Any]) -> str:
    """What makes two requests "the same" for counting attempts: the model and the body without delivery fields."""
    canon = {k: v for k, v in body.items() if k not in VOLATILE_FIELDS}
    canon["model"] = model
    return hashlib.sha256(orjson.dumps(canon, option=orjson.OPT_SORT_KEYS)).hexdigest()


class FaultPlan:
    """Decides the fault, if any, for each request (counts attempts per distinct request)."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def choose(self, faults: tuple[Fault, ...], key: str, header: str | None) -> Fault | None:
        if header:
            return parse_fault(header.split(",")[0].strip())
        if not faults:
            return None
        always = [f for f in faults if f.always]
        if always:
            return always[0]
        n = self._seen.get(key, 0)
        self._seen[key] = n + 1
        return faults[n] if n < len(faults) else None
