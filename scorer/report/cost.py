"""Cost from a user-supplied price table (docs/report.md, "Cost"): per model, per test and per run.

Prices are per million tokens: input, cached input (input tokens the provider served from its prompt cache, billed at
their own rate), output. Token counts are the traffic lines' (bench.scorer.traffic_lines): usage where the response had
it; output tokens counted from the stream otherwise (then the cost is marked estimated), and a request with no input
count adds no input cost (counted as missing). A model is priced by its requested name, exact match first, then the
first shell-style pattern that matches, then its served name the same way; unpriced models are listed, never guessed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.yamlfile import load_checked_yaml
from bench.scorer.results import TrafficLine

_PRICE = {"type": "number", "minimum": 0}
PRICES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["models"],
    "additionalProperties": False,
    "properties": {
        "currency": {"type": "string", "minLength": 1},
        "models": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["input", "output"],
                "additionalProperties": False,
                "properties": {"input": _PRICE, "cached_input": _PRICE, "output": _PRICE},
            },
        },
    },
}


@dataclass(frozen=True)
class Price:
    input: float
    cached_input: float
    output: float


@dataclass(frozen=True)
class Prices:
    currency: str
    models: Mapping[str, Price]

    def find(self, *names: str | None) -> tuple[str, Price] | None:
        for name in names:
            if not name:
                continue
            if name in self.models:
                return name, self.models[name]
            for pattern, price in self.models.items():
                if fnmatch.fnmatchcase(name, pattern):
                    return pattern, price
        return None


def load_prices(path: Path) -> Prices:
    data = load_checked_yaml(path, PRICES_SCHEMA, what="price table", flag="--prices", doc="docs/report.md (Cost)")
    models = {
        str(name): Price(float(p["input"]), float(p.get("cached_input", p["input"])), float(p["output"]))
        for name, p in data["models"].items()
    }
    return Prices(str(data.get("currency", "USD")), models)


@dataclass
class CostRow:
    key: str  # a model, or a test
    requests: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    estimated: int = 0  # requests whose output tokens were counted, not reported
    missing_input: int = 0  # requests without an input token count
    unpriced: int = 0  # requests of a model the table does not price


@dataclass
class Cost:
    currency: str
    per_model: list[CostRow] = field(default_factory=list)
    per_test: list[CostRow] = field(default_factory=list)
    total: CostRow = field(default_factory=lambda: CostRow("run"))
    unpriced_models: list[str] = field(default_factory=list)


def _add(row: CostRow, entry: TrafficLine, price: Price | None) -> None:
    row.requests += 1
    inp = entry.input_tokens
    out = entry.output_tokens or 0
    if inp is None:
        row.missing_input += 1
        inp = 0
    cached = min(entry.cached_input_tokens or 0, inp)
    row.input_tokens += inp
    row.cached_input_tokens += cached
    row.output_tokens += out
    if entry.tokens_source == "counted" or entry.input_tokens_source == "counted":
        row.estimated += 1
    if price is None:
        row.unpriced += 1
        return
    row.cost += price_of(price, inp, cached, out)


def price_of(price: Price, input_tokens: int, cached_input_tokens: int, output_tokens: int) -> float:
    """What one request cost: input not served from the cache, cached input and output, each at its rate."""
    cached = min(cached_input_tokens, input_tokens)
    return ((input_tokens - cached) * price.input + cached * price.cached_input + output_tokens * price.output) / 1e6


def cost(entries: Iterable[TrafficLine], prices: Prices) -> Cost:
    tally = CostTally(prices)
    for entry in entries:
        tally.add(entry)
    return tally.finish()


class CostTally:
    """Cost gathered a traffic line at a time (memory: a row per model and per test)."""

    def __init__(self, prices: Prices) -> None:
        self.prices = prices
        self.per_model: dict[str, CostRow] = {}
        self.per_test: dict[str, CostRow] = {}
        self.out = Cost(prices.currency)
        self.unpriced: set[str] = set()

    def add(self, entry: TrafficLine) -> None:
        model = entry.model or "–"
        found = self.prices.find(entry.model, entry.served_model)
        price = found[1] if found is not None else None
        if price is None:
            self.unpriced.add(model)
        _add(self.per_model.setdefault(model, CostRow(model)), entry, price)
        if entry.test:
            _add(self.per_test.setdefault(entry.test, CostRow(entry.test)), entry, price)
        _add(self.out.total, entry, price)

    def finish(self) -> Cost:
        out = self.out
        out.per_model = [self.per_model[k] for k in sorted(self.per_model)]
        out.per_test = [self.per_test[k] for k in sorted(self.per_test)]
        out.unpriced_models = sorted(self.unpriced)
        return out


@dataclass
class CostDelta:
    model: str
    a: float
    b: float
    delta: float
    a_requests: int
    b_requests: int


def cost_delta(a: Cost, b: Cost) -> list[CostDelta]:
    rows_a = {r.key: r for r in a.per_model}
    rows_b = {r.key: r for r in b.per_model}
    grouped = {k: (rows_a.get(k, CostRow(k)), rows_b.get(k, CostRow(k))) for k in sorted(set(rows_a) | set(rows_b))}
    out = [
        CostDelta(k, ra.cost, rb.cost, rb.cost - ra.cost, ra.requests, rb.requests) for k, (ra, rb) in grouped.items()
    ]
    out.append(
        CostDelta("run", a.total.cost, b.total.cost, b.total.cost - a.total.cost, a.total.requests, b.total.requests)
    )
    return out
