"""Issue 31's hostile programs: each run as a code check and as a replayed `run_command`, as the user running the
tests (root in CI), when that is root as an ordinary user too, and as root of a user namespace. Every one of them
broke today's main (a key read from the rescoring shell, a root-only file read, a root-owned file truncated, a
loopback service reached, processes left running, a hang on a FIFO). Each runs in a fresh process with a deadline,
so a hang fails instead of stalling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.support import users
from tests.support.hostile_programs import SCENARIOS

DEADLINE_S = 180  # a scenario takes a few seconds; only a hang reaches this

# The user running the tests (root in CI), an ordinary user, and root of a user namespace (`unshare -r`: a rootless
# container, where bench is "root" without the sandbox user).
USERS = ["current", "ordinary", "userns"]


def _run(name: str, who: str) -> subprocess.CompletedProcess[str]:
    key = {"BENCH_API_KEY": f"hostile-{uuid.uuid4().hex}"}  # the shell's key, from the start of the process
    if who == "ordinary":
        if os.geteuid() != 0:
            pytest.skip("the tests already run as an ordinary user: the 'current' case is that one")
        if users.ordinary_python() is None:
            pytest.skip("no interpreter the ordinary test user can run with this tree's packages")
        return users.run_module_as_ordinary("tests.support.hostile_programs", name, timeout=DEADLINE_S, env=key)
    env = {**os.environ, "PYTHONPATH": str(users.ROOT), **key}
    prefix = ["unshare", "-r"] if who == "userns" else []
    if who == "userns" and subprocess.run(["unshare", "-r", "true"], capture_output=True).returncode != 0:
        pytest.skip("no user namespaces here (unshare -r fails)")
    return subprocess.run(
        [*prefix, sys.executable, "-m", "tests.support.hostile_programs", name],
        env=env,
        cwd=users.ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )


@pytest.mark.parametrize("who", USERS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_hostile_program_is_contained(name: str, who: str) -> None:
    done = _run(name, who)
    assert done.returncode == 0, done.stderr[-2000:]
    breaches = json.loads(done.stdout.strip().splitlines()[-1])
    assert breaches == [], f"{SCENARIOS[name].__doc__}\n{breaches}"
