"""The sandbox's limits and isolation, on real programs: each would hang, exhaust the machine or leak without them.
The hostile programs of issue 31 (run as root and as an ordinary user) are in test_hostile_programs.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.scorer.checks import run_check
from bench.scorer.evaluators.code import extract_code
from bench.workspace import sandbox
from bench.workspace.sandbox import probe
from tests.scorer.helpers import ctx, score


def run(code: str, timeout: float = 2.0, stdin: str = "") -> sandbox.RunResult:
    result = sandbox.run_python(code, stdin, timeout)
    assert result is not None
    return result


def test_limits_are_set_before_the_program_starts_in_its_own_pid_namespace() -> None:
    code = (
        "import os, resource as r\n"
        "names = ['CPU', 'AS', 'FSIZE', 'NOFILE', 'NPROC', 'CORE']\n"
        "print([r.getrlimit(getattr(r, 'RLIMIT_' + n)) for n in names], os.getpid() == 2)\n"  # bwrap's init is 1
    )
    result = run(code, timeout=2.5)
    limits = sandbox.Limits()
    one = limits.processes + 1  # bubblewrap's init counts in the sandbox's namespace too
    expected = [(4, 5), (limits.memory_bytes,) * 2, (limits.file_bytes,) * 2, (limits.open_files,) * 2, (one, one)]
    assert result.ok and result.stdout == f"{[*map(tuple, expected), (0, 0)]} True\n"


def test_runs_and_reads_stdin_larger_than_a_pipe() -> None:
    # stdin is a sealed memfd: the parent never blocks writing to a program, whether it reads or not.
    text = "abc" * 100_000
    assert run("import sys; print(len(sys.stdin.read()))", stdin=text).stdout == f"{len(text)}\n"
    assert run("print('ignored stdin')", stdin=text).stdout == "ignored stdin\n"


def test_a_program_cannot_write_to_its_stdin() -> None:
    code = "import os\ntry:\n    os.write(0, b'x')\nexcept OSError as e:\n    print(type(e).__name__)\n"
    assert run(code, stdin="given").stdout in ("PermissionError\n", "OSError\n")


def test_a_missing_or_unexecutable_program_is_a_failed_run() -> None:
    with sandbox.Sandbox() as box:
        script = box.write("not-executable", "#!/bin/sh\necho ran\n")
        script.chmod(0o644)
        for argv in (["/usr/bin/no-such-program-here"], [f"{sandbox.MOUNT}/not-executable"]):
            result = box.run(argv, keep=True)
            assert result.exit_code in (126, 127) and result.stdout == "" and "failed to execute" in result.stderr


def test_what_a_program_prints_is_never_taken_for_bwrap_failing() -> None:
    # Whether the sandbox was set up comes from bwrap's status descriptor, never from what a program prints.
    code = "import sys\nsys.stderr.write('bwrap: No permissions to create new namespace\\n')\nsys.exit(1)\n"
    result = run(code, timeout=2.5)
    assert result.exit_code == 1 and not result.ok


def test_infinite_loop_is_killed() -> None:
    result = run("while True: pass", timeout=1.0)
    assert result.timed_out and not result.ok and result.describe() == "killed: time limit"


def test_a_sleeping_program_is_killed_at_the_wall_clock_deadline() -> None:
    result = run("import time\nprint('start', flush=True)\ntime.sleep(60)", timeout=0.5)
    assert result.timed_out and result.stdout == "start\n"


def test_memory_bomb_is_limited() -> None:
    result = run("x = bytearray(4 << 30)\nprint('allocated')")
    assert not result.ok and "MemoryError" in result.stderr and "allocated" not in result.stdout


def test_output_flood_is_cut_and_the_program_killed() -> None:
    result = run("while True: print('x' * 1000)", timeout=10.0)
    assert result.output_limited and not result.timed_out and len(result.stdout) <= sandbox.MAX_OUTPUT


def test_a_file_larger_than_the_limit_cannot_be_written() -> None:
    code = "try:\n    open('/tmp/big', 'wb').write(b'x' * (2 << 20))\nexcept OSError as e:\n    print(e.errno)\n"
    assert run(code).stdout == "27\n"  # EFBIG: Python ignores SIGXFSZ


def test_scratch_space_is_a_capped_tmpfs_and_the_workspace_files_are_read_only() -> None:
    code = (
        "import os\n"
        "try:\n    open('main.py', 'a').write('x')\nexcept OSError as e:\n    print('main.py', e.errno)\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        open(f'f{n}', 'wb').write(b'x' * (1 << 20)); n += 1\n"
        "except OSError as e:\n    print('full', e.errno, n <= 64)\n"
    )
    out = run(code, timeout=10).stdout
    # EROFS (or EACCES first, for the sandbox user), then ENOSPC at the tmpfs's 64 MiB
    assert out in ("main.py 30\nfull 28 True\n", "main.py 13\nfull 28 True\n")


def test_no_network_not_even_loopback() -> None:
    code = (
        "import socket\n"
        "for host in ('1.1.1.1', '127.0.0.1'):\n"
        "    s = socket.socket(); s.settimeout(2)\n"
        "    try:\n        s.connect((host, 80)); print('connected')\n"
        "    except OSError as e:\n        print(type(e).__name__)\n"
    )
    out = run(code, timeout=4.0).stdout
    assert "connected" not in out and out.count("Error") == 2


def test_environment_is_the_fixed_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_SECRET_FOR_TEST", "s3cret")
    env = json.loads(run("import json, os; print(json.dumps(dict(os.environ)))").stdout)
    env.pop("LC_CTYPE", None)  # set by Python itself when the C locale is coerced (PEP 538)
    assert env == {**sandbox.view.ENV, "PWD": sandbox.MOUNT}


def test_what_a_program_sees_of_the_file_system() -> None:
    top = set(json.loads(run("import json, os; print(json.dumps(os.listdir('/')))").stdout))
    system = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}
    assert top <= system | {"etc", "proc", "dev", "tmp", "workspace"} and "workspace" in top


def test_a_root_run_runs_as_the_sandbox_user() -> None:
    uid = run("import os; print(os.getuid())").stdout.strip()
    if sandbox.user.drop_to() is None:
        assert uid == str(os.getuid()) or os.geteuid() == 0  # an ordinary user, or root of a user namespace
    else:
        assert uid == str(sandbox.user.SANDBOX_UID)


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
    monkeypatch.setattr(sandbox.languages, "c_compiler", lambda: None)
    s = score("c_output", ctx("```c\nint main(){return 0;}\n```"), expected_stdout="")
    assert s.status == "skipped" and "compiler" in s.detail


def test_missing_interpreter_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.languages, "python_interpreter", lambda: None)
    assert score("python_output", ctx("print(1)"), expected_stdout="1").status == "skipped"


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    sandbox.box.unavailable.cache_clear()
    yield
    sandbox.box.unavailable.cache_clear()


def _check(evaluator: str, answer: str, **args: object) -> object:
    from bench.catalog.model import Check

    c = ctx(answer)
    return run_check(c, 0, Check(evaluator=evaluator, args=dict(args)))


def test_no_bwrap_gives_the_check_an_error_verdict_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    monkeypatch.setattr(probe, "bwrap", lambda: None)
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap"):
        sandbox.run_python("print(1)", "", 2)
    verdict = _check("python_output", "print(1)", expected_stdout="1")
    assert verdict.status == "error" and "apt-get install bubblewrap" in verdict.detail  # type: ignore[attr-defined]


def test_bwrap_that_cannot_create_namespaces_gives_an_error_verdict(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    # Fault injection: what bwrap prints and does where user namespaces are off (sysctl, AppArmor, a container).
    where = Path(tempfile.mkdtemp())  # one the sandbox user can reach (pytest's tmp_path is 0700)
    where.chmod(0o755)
    fake = where / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(probe, "bwrap", lambda: str(fake))
    problem = sandbox.unavailable()
    assert problem is not None and "No permissions to create new namespace" in problem and "security.md" in problem
    try:
        verdict = _check("c_output", "int main(){}", expected_stdout="")
        assert verdict.status == "error" and "namespace" in verdict.detail  # type: ignore[attr-defined]
    finally:
        shutil.rmtree(where)


def test_the_probe_uses_no_fixed_names_in_the_shared_tmp(fresh_probe: None) -> None:
    # Old self-check wrote /tmp/.stdout etc.: another user's FIFO or link there hung or redirected it.
    planted = []
    for name in (".stdout", ".stderr", ".stdin"):
        path = Path("/tmp") / name
        if not path.exists() and not path.is_symlink():
            os.mkfifo(path)
            planted.append(path)
    try:
        assert sandbox.unavailable() is None
        for path in planted:
            assert stat.S_ISFIFO(path.lstat().st_mode)  # untouched
    finally:
        for path in planted:
            path.unlink()
