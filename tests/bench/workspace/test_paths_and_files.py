from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.catalog import FIXTURES_DIR
from bench.core.errors import BenchError
from bench.workspace import WORKSPACE_TOOLS, ToolWorkspace, workspace_tool_schemas

MINILIB = FIXTURES_DIR / "minilib"


@pytest.fixture
def ws() -> Iterator[ToolWorkspace]:
    with ToolWorkspace.create(MINILIB, ["python3"]) as workspace:
        yield workspace


def test_create_copies_fixture_and_close_deletes(tmp_path: Path) -> None:
    with ToolWorkspace.create(MINILIB) as workspace:
        path = workspace.path
        assert (path / "minilib" / "stats.py").is_file()
        assert not list(path.rglob("__pycache__"))
    assert not path.exists()


def test_schemas_cover_every_tool_in_order() -> None:
    schemas = workspace_tool_schemas(list(WORKSPACE_TOOLS))
    assert [s["function"]["name"] for s in schemas] == list(WORKSPACE_TOOLS)
    assert all(s["type"] == "function" and s["function"]["parameters"]["type"] == "object" for s in schemas)
    with pytest.raises(BenchError, match="unknown workspace tool"):
        workspace_tool_schemas(["rm_rf"])


def test_read_file(ws: ToolWorkspace) -> None:
    result = ws.call("read_file", '{"path": "minilib/__init__.py"}')
    assert result.ok and 'VERSION = "1.4.2"' in result.output
    missing = ws.call("read_file", {"path": "minilib/nope.py"})
    assert not missing.ok and "no such file" in (missing.error or "")
    directory = ws.call("read_file", {"path": "minilib"})
    assert not directory.ok and "directory" in (directory.error or "")


def test_list_dir_is_sorted_and_marks_directories(ws: ToolWorkspace) -> None:
    assert ws.call("list_dir", {"path": "."}).output == "README.md\ncheck.py\nminilib/\ntests/"
    inner = ws.call("list_dir", {"path": "minilib"}).output.splitlines()
    assert inner == sorted(inner) and "stats.py" in inner


def test_grep(ws: ToolWorkspace) -> None:
    result = ws.call("grep", {"pattern": r"def (mean|median)\b"})
    assert result.ok
    assert result.output.splitlines() == ["minilib/stats.py:4:def mean(values):"]
    scoped = ws.call("grep", {"pattern": "import", "path": "tests/test_stack.py"})
    assert scoped.output.splitlines() == [
        "tests/test_stack.py:1:import unittest",
        "tests/test_stack.py:3:from minilib.stack import Stack",
    ]
    assert ws.call("grep", {"pattern": "zzz_nothing"}).output == "no matches"
    bad = ws.call("grep", {"pattern": "("})
    assert not bad.ok and "invalid regular expression" in (bad.error or "")


def test_edit_file_exact_unique_match(ws: ToolWorkspace) -> None:
    ok = ws.call("edit_file", {"path": "minilib/bounds.py", "old": "max(high, min(low, value))", "new": "X"})
    assert ok.ok and "return X" in (ws.path / "minilib/bounds.py").read_text()
    absent = ws.call("edit_file", {"path": "minilib/bounds.py", "old": "not there", "new": "Y"})
    assert not absent.ok and "not found" in (absent.error or "")
    several = ws.call("edit_file", {"path": "minilib/stack.py", "old": "self._items", "new": "Y"})
    assert not several.ok and "occurs 5 times" in (several.error or "")
    created = ws.call("edit_file", {"path": "notes/new.txt", "old": "", "new": "hello\n"})
    assert created.ok and (ws.path / "notes/new.txt").read_text() == "hello\n"
    again = ws.call("edit_file", {"path": "notes/new.txt", "old": "", "new": "x"})
    assert not again.ok and "already exists" in (again.error or "")


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "/etc/passwd", "minilib/../../x", "~/x", "a/../../b", ""],
)
def test_paths_never_escape(ws: ToolWorkspace, path: str) -> None:
    for tool, args in (
        ("read_file", {"path": path}),
        ("edit_file", {"path": path, "old": "", "new": "x"}),
    ):
        result = ws.call(tool, args)
        assert not result.ok, (tool, path)
    assert not (ws.path.parent / "outside.txt").exists()


def test_symlink_out_of_the_workspace_is_refused(ws: ToolWorkspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    os.symlink(secret, ws.path / "link.txt")
    os.symlink(tmp_path, ws.path / "linkdir")
    assert not ws.call("read_file", {"path": "link.txt"}).ok
    assert not ws.call("list_dir", {"path": "linkdir"}).ok
    assert not ws.call("edit_file", {"path": "linkdir/new.txt", "old": "", "new": "x"}).ok
    assert "top secret" not in ws.call("grep", {"pattern": "secret"}).output
    assert not (tmp_path / "new.txt").exists()


def test_symlink_inside_the_workspace_is_fine(ws: ToolWorkspace) -> None:
    os.symlink("minilib/stats.py", ws.path / "stats_link.py")
    assert "def mean" in ws.call("read_file", {"path": "stats_link.py"}).output


def test_model_mistakes_never_raise(ws: ToolWorkspace) -> None:
    cases = [
        ("nope", "{}", "unknown tool"),
        ("read_file", "{not json", "not valid JSON"),
        ("read_file", "[1, 2]", "JSON object"),
        ("read_file", "{}", "'path' is a required property"),
        ("read_file", {"path": 3}, "not of type 'string'"),
        ("edit_file", {"path": "minilib/stats.py"}, "required property"),
    ]
    for name, args, message in cases:
        result = ws.call(name, args)
        assert not result.ok and message in (result.error or ""), (name, args, result)
        assert result.content.startswith("error: ")
    assert ws.calls == len(cases)


def test_offered_tools_limit_what_can_be_called() -> None:
    with ToolWorkspace.create(MINILIB, tools=["read_file"]) as workspace:
        result = workspace.call("edit_file", {"path": "README.md", "old": "minilib", "new": "x"})
        assert not result.ok and "unknown tool" in (result.error or "")
