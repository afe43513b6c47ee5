from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.catalog.model import Catalog
from bench.catalog.model import TestSpec as Spec
from bench.core.cassette.records import Exchange, Response
from bench.scorer.recognise import Recogniser

OPENING = ({"role": "user", "content": "Weather in Rome?"},)
TOOLS = ({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},)


def spec(id: str, messages: tuple[dict[str, Any], ...], tools: tuple[dict[str, Any], ...] = ()) -> Spec:
    return Spec(id=id, suite="s", category="c", subcategory="s", description="", messages=messages, tools=tools)


def record(status: int = 200) -> Exchange:
    return Exchange(response=Response(status=status))


def test_epochs_turns_and_retries_without_tags() -> None:
    catalog = Catalog({"t.w": spec("t.w", OPENING, TOOLS), "t.empty": spec("t.empty", ())}, "h", Path("."))
    rec = Recogniser.of(catalog)
    first = {"messages": list(OPENING), "tools": list(TOOLS)}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
    }
    later = {
        "messages": [*OPENING, call, {"role": "tool", "tool_call_id": "c1", "content": "sun"}],
        "tools": list(TOOLS),
    }
    seen = []
    for chat, rec_ in ((first, record(429)), (first, record()), (later, record()), (first, record())):
        found = rec.claim(chat, "m", rec_)
        assert found is not None
        seen.append((found.test.id, found.epoch, found.turn, found.attempt))
    assert seen == [("t.w", 0, 0, 1), ("t.w", 0, 0, 2), ("t.w", 0, 1, 1), ("t.w", 1, 0, 1)]
    # Other tools, other messages, or a test with no opening conversation: not recognised.
    assert rec.claim({"messages": list(OPENING)}, "m", record()) is None
    assert rec.claim({"messages": [{"role": "user", "content": "hi"}], "tools": list(TOOLS)}, "m", record()) is None
    assert rec.claim({"messages": []}, "m", record()) is None and rec.claim({}, "m", record()) is None
