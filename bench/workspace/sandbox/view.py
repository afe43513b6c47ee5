"""The bubblewrap command line of one run: a file-system view built from scratch, no namespace shared with the host,
and an environment of fixed values only (docs/security.md says what that guarantees)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.workspace.sandbox.limits import Limits

# Where the workspace appears inside: one fixed path, so a program's output never depends on a host's temp names.
MOUNT = "/workspace"
# Read-only system directories (programs, libraries, compilers, interpreters under /usr/local): a link on the host is
# the same link inside (merged /usr), a directory is bound read-only, a missing one is left out.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What the dynamic linker and Debian's `cc` (an alternatives link) need from /etc; nothing else of it.
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
PATH = "/usr/local/bin:/usr/bin:/bin"
ENV: Mapping[str, str] = {
    "PATH": PATH,
    "HOME": MOUNT,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ litter that would change listings and file checks
    "PYTHONIOENCODING": "utf-8",
}


@dataclass(frozen=True)
class Workspace:
    """The host directory a run sees at MOUNT: bound writable (`keep`: what the program writes stays, as a tool's
    workspace needs), or a size-capped tmpfs holding read-only copies of the named files (nothing stays)."""

    host: Path
    keep: bool
    files: tuple[str, ...] = ()


def system_binds(extra_ro: Sequence[str] = ()) -> list[str]:
    args: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ETC:
        args += ["--ro-bind-try", path, path]
    for path in extra_ro:
        args += ["--ro-bind", path, path]
    return args


def workspace_binds(ws: Workspace, limits: Limits) -> list[str]:
    if ws.keep:
        return ["--bind", str(ws.host), MOUNT]
    args = ["--size", str(limits.scratch_bytes), "--tmpfs", MOUNT]
    for name in ws.files:
        args += ["--ro-bind", str(ws.host / name), f"{MOUNT}/{name}"]
    return args


def bwrap_argv(
    bwrap: str, program: Sequence[str], ws: Workspace, limits: Limits, status_fd: int, extra_ro: Sequence[str] = ()
) -> list[str]:
    """bwrap's arguments, then prlimit's (the limits bind inside the sandbox's user namespace, so the process limit
    counts this run's processes only), then the program."""
    args = [
        bwrap,
        "--unshare-all",  # user, IPC, PID, network (an own loopback only), UTS, cgroup
        "--unshare-user",  # required, not tried: --disable-userns needs it
        "--disable-userns",  # no namespaces of its own inside: less kernel within a program's reach
        "--die-with-parent",  # killing bwrap kills the sandbox's PID 1, and with it every process inside
        "--new-session",
        "--clearenv",
        *system_binds(extra_ro),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(limits.scratch_bytes),
        "--tmpfs",
        "/tmp",
        *workspace_binds(ws, limits),
        "--chdir",
        MOUNT,
        "--json-status-fd",
        str(status_fd),
    ]
    for name, value in ENV.items():
        args += ["--setenv", name, value]
    prlimit = ["/usr/bin/prlimit", *(f"--{n.lower()}={soft}:{hard}" for n, soft, hard in limits.rlimits()), "--"]
    return [*args, "--", *prlimit, *program]
