"""What the sandbox needs installed, and how to install it."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

from bench.workspace.sandbox.user import drop_to, setpriv

INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
PRLIMIT = "/usr/bin/prlimit"


@functools.cache
def bwrap() -> str | None:
    return shutil.which("bwrap")


def missing() -> str | None:
    """What is not installed that the sandbox needs, as one line saying how to install it; None when all is here."""
    if bwrap() is None:
        return f"the code sandbox needs bubblewrap (bwrap), which is not installed: {INSTALL}"
    if not os.access(PRLIMIT, os.X_OK):
        return f"the code sandbox needs {PRLIMIT} (util-linux): install util-linux"
    if drop_to() is not None and setpriv() is None:
        return "the code sandbox needs setpriv (util-linux) to leave root: install util-linux"
    return None


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
