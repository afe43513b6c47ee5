"""The sandbox's limits, on real programs: each would hang or exhaust the machine without them."""

from __future__ import annotations

import pytest

from bench.scorer.evaluators.code import extract_code
from bench.workspace import sandbox
from tests.scorer.helpers import ctx, score


@pytest.fixture(autouse=True, params=["launchers", "preexec"])
def spawn_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each limit holds both ways a program is started: behind util-linux's prlimit and setpriv when they are here,
    else set by Python in the forked child."""
    if request.param == "launchers" and sandbox._launchers() is None:
        pytest.skip("prlimit and setpriv are not installed here")
    if request.param == "preexec":
        monkeypatch.setattr(sandbox, "_launchers", lambda: None)
    return str(request.param)


def test_limits_and_session_are_set_before_the_program_starts() -> None:
    code = (
        "import os, resource as r\n"
        "names = ['CPU', 'AS', 'FSIZE', 'NOFILE', 'CORE']\n"
        "print([r.getrlimit(getattr(r, 'RLIMIT_' + n)) for n in names], os.getsid(0) == os.getpid())\n"
    )
    result = run(code, timeout=2.5)
    limits = sandbox.Limits()
    expected = [(4, 5), (limits.memory_bytes,) * 2, (limits.file_bytes,) * 2, (limits.open_files,) * 2, (0, 0)]
    assert result.ok and result.stdout == f"{[tuple(e) for e in expected]} True\n"


def test_a_missing_program_raises_what_popen_raises_and_one_not_executable_never_runs(spawn_path: str) -> None:
    with sandbox.Sandbox() as box:
        with pytest.raises(FileNotFoundError):
            sandbox._spawn(["no-such-program-here"], box.dir, b"", sandbox.Limits(), net=False)
        script = box.write("not-executable", "#!/bin/sh\necho ran\n")
        script.chmod(0o644)
        if spawn_path == "preexec":
            with pytest.raises(PermissionError):
                sandbox._spawn([str(script)], box.dir, b"", sandbox.Limits(), net=False)
        else:  # the launcher's exec fails: the program's result, as behind unshare
            result = sandbox._spawn([str(script)], box.dir, b"", sandbox.Limits(), net=False)
            assert result.exit_code == 126 and "Permission denied" in result.stderr and result.stdout == ""


def test_what_a_program_prints_is_never_taken_for_a_launcher_failing() -> None:
    # An answer's program that prints a launcher's own words and exits as a launcher does is a failed program.
    code = (
        "import sys\n"
        "sys.stderr.write('setpriv: failed to execute x: Resource temporarily unavailable\\n')\n"
        "sys.exit(126)\n"
    )
    result = run(code, timeout=2.5)
    assert result.exit_code == 126 and not result.ok


SANDBOX_USER = sandbox._nobody()  # looked up here, not in a forked child


def _as_sandbox_user() -> None:
    """preexec_fn of a helper process that belongs to the sandbox user (its processes count toward the limit)."""
    import os

    assert SANDBOX_USER is not None
    os.setgid(SANDBOX_USER[1])
    os.setuid(SANDBOX_USER[0])


def run(code: str, timeout: float = 2.0) -> sandbox.RunResult:
    result = sandbox.run_python(code, "", timeout)
    assert result is not None
    return result


def test_runs_and_reads_stdin() -> None:
    result = sandbox.run_python("print(input()[::-1])", "abc\n", 5)
    assert result is not None and result.ok and result.stdout == "cba\n"


def test_infinite_loop_is_killed() -> None:
    result = run("while True: pass", timeout=1.0)
    assert result.timed_out and not result.ok


def test_memory_bomb_is_limited() -> None:
    result = run("x = bytearray(4 << 30)\nprint('allocated')")
    assert not result.ok and "MemoryError" in result.stderr and "allocated" not in result.stdout


def test_fork_bomb_is_limited() -> None:
    code = (
        "import os, sys\n"
        "n = 0\n"
        "while n < 10000:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        print('limited', flush=True); break\n"
        "    if pid == 0:\n"
        "        import time; time.sleep(5); os._exit(0)\n"
        "    n += 1\n"
    )
    result = run(code, timeout=3.0)
    assert "limited" in result.stdout


def test_output_flood_is_cut() -> None:
    result = run("while True: print('x' * 1000)", timeout=3.0)
    assert result.output_limited and len(result.stdout) <= sandbox.MAX_OUTPUT


def test_no_network_when_namespaces_work() -> None:
    if not sandbox.network_isolation():
        pytest.skip("unshare -rn is not available here: no network isolation (documented)")
    code = "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('1.1.1.1', 80))\nprint('connected')"
    result = run(code, timeout=4.0)
    assert "connected" not in result.stdout and "OSError" in result.stderr


def test_environment_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_SECRET_FOR_TEST", "s3cret")
    result = run("import os; print(sorted(os.environ))")
    assert "BENCH_SECRET_FOR_TEST" not in result.stdout and "PATH" in result.stdout


def test_extract_code_prefers_the_language() -> None:
    text = "```\nuntagged\n```\n```python\nprint(1)\n```\n```c\nint main(){}\n```"
    assert extract_code(text, frozenset({"python"})) == "print(1)\n"
    assert extract_code(text, frozenset({"c"})) == "int main(){}\n"
    assert extract_code(text, frozenset({"rust"})) == "untagged\n"
    assert extract_code("print(2)", frozenset({"python"})) == "print(2)"


def test_python_output_with_harness() -> None:
    answer = "Here:\n```python\ndef add(a, b):\n    return a + b\n```"
    assert score("python_output", ctx(answer), expected_stdout="5\n", harness="print(add(2, 3))").score == 1.0
    wrong = score("python_output", ctx(answer), expected_stdout="6", harness="print(add(2, 3))")
    assert wrong.score == 0.0 and "5" in wrong.detail


def test_c_output() -> None:
    if sandbox.c_compiler() is None:
        pytest.skip("no C compiler")
    answer = '```c\n#include <stdio.h>\nint main(void){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a*b);}\n```'
    assert score("c_output", ctx(answer), expected_stdout="12", stdin="3 4").score == 1.0
    broken = score("c_output", ctx("```c\nint main( {\n```"), expected_stdout="")
    assert broken.score == 0.0 and "does not compile" in broken.detail


def test_missing_compiler_is_skipped_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "c_compiler", lambda: None)
    s = score("c_output", ctx("```c\nint main(){return 0;}\n```"), expected_stdout="")
    assert s.status == "skipped" and "compiler" in s.detail


def test_missing_interpreter_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "python_interpreter", lambda: None)
    assert score("python_output", ctx("print(1)"), expected_stdout="1").status == "skipped"


@pytest.mark.skipif(sandbox._nobody() is None, reason="programs run as the sandbox user only when bench runs as root")
def test_other_sandboxes_processes_do_not_stop_a_program_from_starting() -> None:
    # Other sandboxes (rescore --jobs N) run as the same user: with the process limit at `processes` alone, a user
    # already running that many made every new program's exec fail with EAGAIN (a traceback out of rescore).
    import os
    import subprocess

    uid, _ = sandbox._nobody()  # type: ignore[misc]

    # One shell as the sandbox user starts the sleepers (forking the test process once each took most of a minute on
    # a loaded machine) and says so once every one of them exists: the program below starts after them, by design.
    count = 2 * sandbox.Limits().processes + 8
    script = f"for i in $(seq {count}); do sleep 60 >/dev/null 2>&1 & done; echo started; wait"
    sleepers = subprocess.Popen(
        ["sh", "-c", script], preexec_fn=_as_sandbox_user, start_new_session=True, stdout=subprocess.PIPE
    )
    try:
        assert sleepers.stdout is not None and sleepers.stdout.readline() == b"started\n"
        assert sandbox._user_process_count(uid) >= count + 1
        result = sandbox.run_python("print('ran')", "", 5)
        assert result is not None and result.ok and result.stdout == "ran\n"
    finally:
        os.killpg(sleepers.pid, 9)
        sleepers.wait()
        assert sleepers.stdout is not None
        sleepers.stdout.close()


@pytest.mark.skipif(sandbox._nobody() is None, reason="programs run as the sandbox user only when bench runs as root")
def test_a_program_started_with_its_user_past_the_process_limit(
    monkeypatch: pytest.MonkeyPatch, spawn_path: str
) -> None:
    # Set in the forked child, the limit fails the exec with EAGAIN (raised as BlockingIOError, which Sandbox.run
    # retries); behind the launchers the user changes before the limit is set, so the program starts, and the limit
    # still stops its forks.
    import subprocess

    sleeper = subprocess.Popen(["sleep", "60"], preexec_fn=_as_sandbox_user, start_new_session=True)
    monkeypatch.setattr(sandbox, "_nproc_limit", lambda limits, user: 1)
    python = sandbox.python_interpreter()
    assert python is not None
    code = "import os\ntry:\n    os.fork()\nexcept BlockingIOError:\n    print('fork refused')\n"
    try:
        with sandbox.Sandbox() as box:
            if spawn_path == "preexec":
                with pytest.raises(BlockingIOError):
                    sandbox._spawn([python, "-I", "-c", code], box.dir, b"", sandbox.Limits(), net=False)
            else:
                result = sandbox._spawn([python, "-I", "-c", code], box.dir, b"", sandbox.Limits(), net=False)
                assert result.ok and result.stdout == "fork refused\n", result
    finally:
        sleeper.kill()
        sleeper.wait()
