"""Who the sandbox runs as. As root (of the host), programs run as an unprivileged uid: root bypasses file modes on
whatever it can see, and the kernel exempts it from the process limit. Inside a user namespace without that uid (a
rootless container, `unshare -r`), bench's "root" is an ordinary user of the host already, and stays."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

SANDBOX_UID = SANDBOX_GID = 65534  # nobody/nogroup on Debian and most distributions; no entry in /etc/passwd needed


def _mapped(uid: int, map_file: str) -> bool:
    try:
        lines = Path(map_file).read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        inside, _outside, count = (int(x) for x in line.split())
        if inside <= uid < inside + count:
            return True
    return False


@functools.cache
def drop_to() -> tuple[int, int] | None:
    """(uid, gid) to switch to before starting bwrap, or None to run as the current user."""
    if os.geteuid() != 0:
        return None
    if not (_mapped(SANDBOX_UID, "/proc/self/uid_map") and _mapped(SANDBOX_GID, "/proc/self/gid_map")):
        return None
    return SANDBOX_UID, SANDBOX_GID


@functools.cache
def limit_exempt() -> bool:
    """Whether the kernel's process limit cannot bind the sandbox: bench is the host's root (uid 0 outside too) in
    a user namespace that maps no other user (root's `unshare -r`). The kernel exempts the host's root from
    RLIMIT_NPROC in every namespace, so the parent counts the sandbox's processes itself (launch.py)."""
    if os.geteuid() != 0 or drop_to() is not None:
        return False
    try:
        lines = Path("/proc/self/uid_map").read_text().splitlines()
    except OSError:
        return True
    for line in lines:
        inside, outside, count = (int(x) for x in line.split())
        if inside <= 0 < inside + count:
            return outside == 0
    return True


@functools.cache
def setpriv() -> str | None:
    return shutil.which("setpriv")


def launcher(user: tuple[int, int] | None) -> list[str]:
    """The command prefix that becomes `user` between exec calls (subprocess's own `user=` forks the whole parent)."""
    if user is None:
        return []
    tool = setpriv()
    assert tool is not None  # probe.unavailable() refuses to run without it
    return [tool, f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"]


def hand_over(path: Path) -> None:
    """Make a directory bench created (and everything in it) the sandbox user's, so a run can write it. Links are
    changed themselves, never followed."""
    user = drop_to()
    if user is None:
        return
    os.lchown(path, *user)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), *user)
