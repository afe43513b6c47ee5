from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.catalog import FIXTURES_DIR
from bench.workspace import PatchError, ToolError, ToolWorkspace, apply_hunks, parse_patch
from bench.workspace.patch import apply_patch

MINILIB = FIXTURES_DIR / "minilib"

LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "\n", "  indented\n", "x = 1\n"]), max_size=25)


def udiff(old: list[str], new: list[str], context: int = 3, name: str = "f.txt") -> str:
    return "".join(difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", n=context))


@settings(max_examples=150, deadline=None)
@given(old=LINES, new=LINES, context=st.integers(0, 4))
def test_difflib_diffs_apply_exactly(old: list[str], new: list[str], context: int) -> None:
    diff = udiff(old, new, context)
    if not diff:
        return
    (fp,) = parse_patch(diff)
    assert apply_hunks(old, fp.hunks, "f.txt") == new


@settings(max_examples=100, deadline=None)
@given(data=st.data(), size=st.integers(1, 30), shift=st.integers(0, 8))
def test_hunks_still_apply_when_the_file_moved(data: st.DataObject, size: int, shift: int) -> None:
    old = [f"line {i}\n" for i in range(size)]
    new = list(old)
    for index in sorted(data.draw(st.sets(st.integers(0, size - 1), min_size=1, max_size=3)), reverse=True):
        new[index : index + 1] = data.draw(
            st.sampled_from([[], [f"changed {index}\n"], [f"new {index}\n", old[index]]])
        )
    (fp,) = parse_patch(udiff(old, new, data.draw(st.integers(1, 3))))
    # The file the patch meets has gained lines at the top since the diff was made: every hunk is `shift` lines off.
    prefix = [f"header {i}\n" for i in range(shift)]
    assert apply_hunks(prefix + old, fp.hunks, "f.txt") == prefix + new


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(["-", "+", " ", "@", "\n", "a", "/", "0", "1", ",", "\\", "\t"]), max_size=200))
def test_parser_only_raises_patch_error(text: str) -> None:
    try:
        patches = parse_patch(text)
    except PatchError:
        return
    assert patches and all(fp.hunks and all(h.lines for h in fp.hunks) for fp in patches)


def test_parser_ignores_counts_and_surrounding_prose() -> None:
    patch = (
        "Here is the fix:\n"
        "diff --git a/m.py b/m.py\n"
        "index 123..456 100644\n"
        "--- a/m.py\t2024-01-01\n"
        "+++ b/m.py\n"
        "@@ -10,99 +10,1 @@ def f():\n"
        " keep\n"
        "-old\n"
        "+new\n"
        "\n"
        "That should do it.\n"
    )
    (fp,) = parse_patch(patch)
    assert (fp.old_path, fp.new_path) == ("a/m.py", "b/m.py")
    assert [(hl.op, hl.text) for hl in fp.hunks[0].lines] == [(" ", "keep"), ("-", "old"), ("+", "new")]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("just prose", "no file header"),
        ("@@ -1 +1 @@\n-a\n+b\n", "hunk before any"),
        ("--- a/f\n+++ b/f\n@@ bad @@\n-a\n", "malformed hunk header"),
        ("--- a/f\n+++ b/f\n", "no hunks for b/f"),
        ("--- a/f\n+++ b/f\n@@ -1 +1 @@\n a\n", "changes nothing"),
        ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n", "both sides"),
    ],
)
def test_malformed_patches(patch: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        parse_patch(patch)


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_apply_creates_deletes_and_renames(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    write(root, "gone.txt", "bye\n")
    write(root, "old.txt", "one\ntwo\n")
    patch = (
        "--- /dev/null\n+++ b/pkg/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
        "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
        "--- a/old.txt\n+++ b/renamed.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    )
    summary = apply_patch(root, patch)
    assert summary.splitlines() == ["created pkg/new.txt (1 hunk)", "deleted gone.txt", "patched renamed.txt (1 hunk)"]
    assert (root / "pkg/new.txt").read_text() == "hello\nworld\n"
    assert not (root / "gone.txt").exists() and not (root / "old.txt").exists()
    assert (root / "renamed.txt").read_text() == "one\n2\n"


def test_failing_hunk_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    write(root, "a.txt", "alpha\nbeta\n")
    write(root, "b.txt", "gamma\n")
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-alpha\n+ALPHA\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-delta\n+DELTA\n"
    )
    with pytest.raises(PatchError, match=r"b.txt: hunk 1 \(@@ -1 @@\) does not apply"):
        apply_patch(root, patch)
    assert (root / "a.txt").read_text() == "alpha\nbeta\n"


def test_no_newline_at_end_of_file(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    write(root, "f.txt", "a\nb")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n a\n-b\n\\ No newline at end of file\n+b\n+c\n"
    apply_patch(root, patch)
    assert (root / "f.txt").read_text() == "a\nb\nc\n"
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -3 +3 @@\n-c\n+end\n\\ No newline at end of file\n"
    apply_patch(root, patch)
    assert (root / "f.txt").read_text() == "a\nb\nend"


def test_trailing_whitespace_is_tolerated_on_a_second_pass(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    write(root, "f.py", "def f():   \n    return 1\n")
    apply_patch(root, "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n")
    assert (root / "f.py").read_text() == "def f():   \n    return 2\n"


def test_creating_an_existing_file_or_patching_a_missing_one_fails(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    write(root, "f.txt", "x\n")
    with pytest.raises(PatchError, match="already exists"):
        apply_patch(root, "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1 @@\n+y\n")
    with pytest.raises(PatchError, match="no such file"):
        apply_patch(root, "--- a/g.txt\n+++ b/g.txt\n@@ -1 +1 @@\n-x\n+y\n")


def test_patch_paths_cannot_escape(tmp_path: Path) -> None:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    with pytest.raises(ToolError, match="escapes"):
        apply_patch(root, "--- /dev/null\n+++ b/../evil.txt\n@@ -0,0 +1 @@\n+x\n")
    assert not (tmp_path / "evil.txt").exists()


def test_apply_patch_tool_reports_failures_as_results() -> None:
    with ToolWorkspace.create(MINILIB) as ws:
        bad = ws.call(
            "apply_patch", {"patch": "--- a/minilib/stats.py\n+++ b/minilib/stats.py\n@@ -1 +1 @@\n-nope\n+x\n"}
        )
        assert not bad.ok and "does not apply" in (bad.error or "")
        good = ws.call(
            "apply_patch",
            {
                "patch": "--- a/minilib/stack.py\n+++ b/minilib/stack.py\n@@ -14,2 +14,2 @@\n"
                '             raise IndexError("pop from an empty stack")\n'
                "-        return self._items.pop(0)\n+        return self._items.pop()\n"
            },
        )
        assert good.ok, good
        assert ws.run(["python3", "-m", "unittest", "tests.test_stack"])[0] == 0
