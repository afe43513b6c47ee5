"""Each flawed profile makes its one mistake, and nothing else."""

from __future__ import annotations

import orjson
import pytest

from bench.catalog.model import Catalog, Limits, RefCall, Reference, Workspace
from bench.catalog.sim.behaviours import BEHAVIOURS, behaviour
from bench.catalog.sim.reply import Reply, SimRequest
from bench.core.parsed import _TEXT_TOOL_CALL
from tests.catalog.conftest import make_test


def ask(mini: Catalog, model: str, test_id: str, turn: int = 0) -> Reply:
    test = mini.tests[test_id]
    req = SimRequest(model=model, body={}, messages=list(test.messages), tools=test.tools, test=test, turn=turn)
    return BEHAVIOURS[model](req)


def test_flawed_profiles_keep_text_answers(mini: Catalog) -> None:
    for name in BEHAVIOURS:
        assert ask(mini, name, "t.text").content == "Paris is the capital of France."


def test_each_profile_makes_its_mistake(mini: Catalog) -> None:
    bad = ask(mini, "flawed-invalid-json", "t.tool").tool_calls[0]
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(bad.arguments)
    text = ask(mini, "flawed-text-tool-call", "t.tool")
    assert not text.tool_calls and _TEXT_TOOL_CALL.search(text.content)
    assert not ask(mini, "flawed-no-call", "t.tool").tool_calls
    assert [c.name for c in ask(mini, "flawed-wrong-tool", "t.tool").tool_calls] == ["get_time"]
    unknown = ask(mini, "flawed-unknown-tool", "t.tool").tool_calls
    assert [c.name for c in unknown] == ["run_shell"] and orjson.loads(unknown[0].arguments)["city"] == "Paris"
    assert "run_shell" not in {(t.get("function") or {}).get("name") for t in mini.tests["t.tool"].tools}
    wrong = orjson.loads(ask(mini, "flawed-wrong-args", "t.tool").tool_calls[0].arguments)
    assert wrong["city"] != "Paris" and wrong["unit"] == "c"
    # The looping model never gives its final answer, whatever the turn.
    assert ask(mini, "flawed-call-limit", "t.multi", turn=3).tool_calls
    assert ask(mini, "oracle", "t.multi", turn=1).content == "It is sunny in Rome."


def test_edit_profiles() -> None:
    edit = RefCall("edit_file", {"path": "a.py", "old": "x = 1", "new": "x = 2"})
    patch = RefCall("apply_patch", {"patch": "--- a/a.py\n+++ b/a.py\n@@ -1,1 +1,1 @@\n-x = 1\n+x = 2\n"})
    test = make_test(
        "t.ws",
        workspace=Workspace("minilib", ("edit_file", "apply_patch")),
        limits=Limits(max_turns=3, max_calls=3),
        reference=Reference(turns=((edit, patch),), answer="done"),
    )
    catalog = Catalog({test.id: test}, "h", test.source or __import__("pathlib").Path("."))
    failed = ask(catalog, "flawed-patch-failed", "t.ws").tool_calls
    assert orjson.loads(failed[0].arguments)["old"] != "x = 1"
    assert "-x = 1" not in orjson.loads(failed[1].arguments)["patch"]
    broken = ask(catalog, "flawed-bad-edit", "t.ws").tool_calls
    assert "SystemExit" in orjson.loads(broken[0].arguments)["new"]
    new_patch = orjson.loads(broken[1].arguments)["patch"]
    assert "-x = 1" in new_patch and "@@ -1,1 +1,2 @@" in new_patch


def test_registry_refuses_duplicates() -> None:
    with pytest.raises(ValueError, match="twice"):
        behaviour("oracle")(lambda req: Reply())
