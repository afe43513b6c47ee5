"""The Go program evaluator (go_output) on real programs built with Debian's Go toolchain in the sandbox, and the
clock every sandboxed program sees (TZ=UTC)."""

from __future__ import annotations

import pytest

from bench.scorer.evaluators import code
from bench.workspace import sandbox
from tests.scorer.helpers import ctx, score

needs_go = pytest.mark.skipif(
    code.go_toolchain() is None, reason="no Go toolchain here (scripts/test installs Debian's golang-go when root)"
)

PRODUCT = """Here is the program:

```go
package main

import "fmt"

func main() {
	var a, b int
	fmt.Scan(&a, &b)
	fmt.Println(a * b)
}
```
"""


@needs_go
def test_a_go_program_is_built_run_on_its_stdin_and_its_stdout_compared() -> None:
    assert score("go_output", ctx(PRODUCT), expected_stdout="42\n", stdin="6 7").score == 1.0
    wrong = score("go_output", ctx(PRODUCT), expected_stdout="43", stdin="6 7")
    assert wrong.score == 0.0 and "'42'" in wrong.detail


@needs_go
def test_a_go_program_that_does_not_build_scores_zero_saying_so() -> None:
    broken = score("go_output", ctx("```go\npackage main\n\nfunc main() { undefined() }\n```"), expected_stdout="")
    assert broken.score == 0.0 and "does not build" in broken.detail


@needs_go
def test_a_go_program_that_loops_is_killed_at_its_time_limit() -> None:
    loop = "```go\npackage main\n\nfunc main() {\n\tfor {\n\t}\n}\n```"
    result = score("go_output", ctx(loop), expected_stdout="", timeout_s=1)
    assert result.score == 0.0 and "time limit" in result.detail


@needs_go
def test_a_go_program_sees_utc_as_its_local_time_zone() -> None:
    zone = (
        '```go\npackage main\n\nimport (\n\t"fmt"\n\t"os"\n\t"time"\n)\n\n'
        'func main() {\n\tname, _ := time.Now().Zone()\n\tfmt.Println(os.Getenv("TZ"), name)\n}\n```'
    )
    assert score("go_output", ctx(zone), expected_stdout="UTC UTC\n").score == 1.0


def test_without_go_the_check_is_skipped_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code, "go_toolchain", lambda: None)
    s = score("go_output", ctx(PRODUCT), expected_stdout="42")
    assert s.status == "skipped" and "golang-go" in s.detail


def test_a_python_program_sees_tz_utc() -> None:
    result = sandbox.run_python("import os, time\nprint(os.environ.get('TZ'), time.strftime('%Z'))", "", 5.0)
    if result is None:
        pytest.skip("no Python interpreter the sandbox can run")
    assert result.ok and result.stdout.split() == ["UTC", "UTC"]
