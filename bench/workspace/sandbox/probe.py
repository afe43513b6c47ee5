"""Whether the sandbox can run here, checked once per process, and what to do when it cannot: never a silent run
without it. The check starts `true` in a fresh empty directory of its own (no fixed names in a shared /tmp)."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

from bench.workspace.sandbox.limits import Limits, SandboxUnavailable
from bench.workspace.sandbox.user import drop_to, setpriv

INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
PRLIMIT = "/usr/bin/prlimit"


@functools.cache
def bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def unavailable() -> str | None:
    """None when programs can run sandboxed here, else one line saying why and how to fix it."""
    if bwrap() is None:
        return f"the code sandbox needs bubblewrap (bwrap), which is not installed: {INSTALL}"
    if not os.access(PRLIMIT, os.X_OK):
        return f"the code sandbox needs {PRLIMIT} (util-linux): install util-linux"
    if drop_to() is not None and setpriv() is None:
        return "the code sandbox needs setpriv (util-linux) to leave root: install util-linux"
    from bench.workspace.sandbox.box import Sandbox

    try:
        with Sandbox(probing=True) as box:
            result = box.run(["/bin/true"], limits=Limits(timeout_s=10))
    except SandboxUnavailable as exc:
        return f"{exc}"
    except OSError as exc:
        return f"bubblewrap could not start ({exc.strerror or exc}); {INSTALL}"
    if not result.ok:
        return f"bubblewrap ran but a trivial program failed ({result.describe()}); see docs/security.md"
    return None


def require() -> None:
    problem = unavailable()
    if problem is not None:
        raise SandboxUnavailable(problem)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
