"""Building blocks for scorer tests: tests, turns and cassettes made by hand (no simulator, no network)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import orjson

from bench.catalog.model import Catalog, Check, Limits, Reference, TestSpec, Workspace
from bench.core.cassette import CassetteWriter
from bench.core.cassette.records import Exchange, RunMeta, Settings
from bench.core.parse import parse_exchange
from bench.scorer.checks import run_check
from bench.scorer.context import Call, EvalContext, Turn
from bench.scorer.registry import Score
from bench.scorer.scoring import slim
from bench.scorer.synth import exchange_record, sse_chunks

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    },
}

NO_LIMITS = Limits()
NO_REFERENCE = Reference()


def spec(
    checks: Sequence[Check] = (),
    *,
    id: str = "t.one",
    suite: str = "t",
    tools: Sequence[Mapping[str, Any]] = (),
    workspace: Workspace | None = None,
    limits: Limits = NO_LIMITS,
    pass_threshold: float = 1.0,
    hash: str = "h1",
    reference: Reference = NO_REFERENCE,
) -> TestSpec:
    return TestSpec(
        id=id,
        suite=suite,
        category="cat",
        subcategory="sub",
        description="a test",
        messages=({"role": "user", "content": "hi"},),
        tools=tuple(tools),
        checks=tuple(checks),
        workspace=workspace,
        limits=limits,
        pass_threshold=pass_threshold,
        hash=hash,
        reference=reference,
    )


def call(name: str, args: Mapping[str, Any] | str, index: int = 0) -> Call:
    raw = args if isinstance(args, str) else orjson.dumps(args).decode()
    try:
        parsed, ok = orjson.loads(raw), True
    except orjson.JSONDecodeError:
        parsed, ok = None, False
    return Call(index, f"call_{index}", name, raw, parsed, ok)


def turn(content: str = "", calls: Sequence[Call] = (), *, n: int = 0, attempt: int = 1, **kw: Any) -> Turn:
    return Turn(id=f"x{n}-{attempt}", turn=n, attempt=attempt, content=content, calls=tuple(calls), **kw)


def ctx(text: str = "", calls: Sequence[Sequence[Call]] = (), test: TestSpec | None = None, **kw: Any) -> EvalContext:
    turns = [turn("", c, n=i) for i, c in enumerate(calls)]
    turns.append(turn(text, n=len(turns), **kw))
    if calls and not text:
        turns.pop()
    return EvalContext(test or spec(), turns)


def score(evaluator: str, context: EvalContext, /, **args: Any) -> Score:
    return run_check(context, 0, Check(evaluator, args))


def parsed_turn(content: str = "", calls: Sequence[tuple[str, Any]] = (), **tags: str) -> Turn:
    record = exchange_record(sse_chunks(content, calls), tags={"turn": "0", "attempt": "1", **tags})
    return slim(parse_exchange(record))


def record(
    test: str,
    content: str = "",
    calls: Sequence[tuple[str, Any]] = (),
    *,
    model: str = "m1",
    run: str = "r1",
    epoch: int = 0,
    turn: int = 0,
    attempt: int = 1,
    id: str = "x0",
    **kw: Any,
) -> Exchange:
    tags = {"run": run, "test": test, "model": model, "epoch": str(epoch), "turn": str(turn), "attempt": str(attempt)}
    return exchange_record(sse_chunks(content, calls), id=id, tags=tags, **kw)


def write_cassette(
    path: Path, records: Sequence[Exchange], *, tests: Mapping[str, str] | None = None, close: bool = True
) -> Path:
    run = RunMeta(id="r1", tests=dict(tests) if tests is not None else None)
    w = CassetteWriter(path, settings=Settings(mode="record"), run=run)
    for i, rec in enumerate(records):
        w.put(msgspec.structs.replace(rec, id=rec.id if rec.id != "x0" else f"x{i}"))
    if close:
        w.close()
    return path


# Two tests of the scorer's pipeline and its merge: a capital and a weather tool call, with their hashes.
CAPITAL = spec([Check("exact_token", {"value": "Paris"})], id="t.capital", hash="hc")
WEATHER = spec(
    [Check("tool_args", {"name": "get_weather", "args": {"city": "Paris"}})],
    id="t.weather",
    tools=[WEATHER_TOOL],
    hash="hw",
)
HASHES = {"t.capital": "hc", "t.weather": "hw"}


def make_catalog(*tests: Any) -> Catalog:
    return Catalog(tests={t.id: t for t in tests}, hash="cat", root=Path("."))


CATALOG = make_catalog(CAPITAL, WEATHER)
