"""An ordinary (non-root) user for tests that must hold both as root and as an ordinary user, and a way to run a
Python module as that user with this tree's code."""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

NAME = "bench-ordinary"
ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def ordinary_user() -> tuple[int, int] | None:
    """(uid, gid) of the test user, created (useradd, no home) when bench's tests run as root; None otherwise."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(NAME)
    except KeyError:
        if shutil.which("useradd") is None:
            return None
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
            check=True,
            capture_output=True,
        )
        pw = pwd.getpwnam(NAME)
    return pw.pw_uid, pw.pw_gid


def _env() -> dict[str, str]:
    # This tree and the venv's packages: the venv's own interpreter may sit where the user cannot reach (/root).
    path = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": path, "HOME": "/nonexistent", "LANG": "C.UTF-8"}


def _as(user: tuple[int, int]) -> list[str]:
    return ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"]


@functools.cache
def ordinary_python() -> str | None:
    """An interpreter the ordinary user can run that imports bench and this tree's tests (same minor version as the
    venv's, for its compiled packages)."""
    user = ordinary_user()
    if user is None:
        return None
    for candidate in dict.fromkeys([sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"]):
        probe = [candidate, "-c", "import bench.workspace.sandbox, tests.support.hostile_programs"]
        try:
            done = subprocess.run(_as(user) + probe, env=_env(), cwd="/", capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return candidate
    return None


def run_module_as_ordinary(
    module: str, *args: str, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    user, python = ordinary_user(), ordinary_python()
    assert user is not None and python is not None
    return subprocess.run(
        [*_as(user), python, "-m", module, *args],
        env={**_env(), **(env or {})},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=timeout,
    )
