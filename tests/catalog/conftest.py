"""Shared fixtures for the simulator and driver tests: a small hand-built catalog (independent of the built-in one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.catalog.model import Catalog, Check, Limits, RefCall, Reference, TestSpec

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def make_test(id: str, **kw: object) -> TestSpec:
    base: dict[str, object] = {
        "suite": "mini",
        "category": "cat",
        "subcategory": "sub",
        "description": id,
        "messages": ({"role": "user", "content": f"question for {id}"},),
        "hash": f"h-{id}",
    }
    base.update(kw)
    return TestSpec(id=id, **base)  # type: ignore[arg-type]


def mini_catalog() -> Catalog:
    tests = [
        make_test("t.text", reference=Reference(answer="Paris is the capital of France.")),
        make_test(
            "t.tool",
            tools=(WEATHER, TIME),
            reference=Reference(turns=((RefCall("get_weather", {"city": "Paris", "unit": "c"}),),)),
            checks=(Check("tool_args", {"name": "get_weather", "args": {"city": "Paris"}}),),
        ),
        make_test(
            "t.parallel",
            tools=(WEATHER, TIME),
            reference=Reference(
                turns=((RefCall("get_weather", {"city": "Oslo"}), RefCall("get_time", {"city": "Oslo"})),)
            ),
        ),
        make_test(
            "t.multi",
            tools=(WEATHER,),
            limits=Limits(max_turns=4, max_calls=3),
            reference=Reference(answer="It is sunny in Rome.", turns=((RefCall("get_weather", {"city": "Rome"}),),)),
        ),
    ]
    return Catalog(tests={t.id: t for t in tests}, hash="mini-hash", root=Path("."))


@pytest.fixture
def mini() -> Catalog:
    return mini_catalog()
