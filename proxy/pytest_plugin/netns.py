"""`--bench-netns`: the whole pytest session in a network namespace of its own, where nothing but its own loopback
exists. Unlike the in-process block (bench.proxy.pytest_plugin.network), it holds for every process and every way
of reaching the kernel: subprocesses (curl, another Python), C extensions, ctypes, raw sockets, DNS.

pytest starts again, with the same command line, under bubblewrap (`bwrap --dev-bind / / --unshare-net`: the same
files, the same user, a new network namespace with its loopback up); the environment variable NETNS_ENV says it is
inside, so it happens once, and pytest-xdist's workers, started from inside, are inside too. Replay only: recording
needs the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

NETNS_ENV = "BENCH_PYTEST_NETNS"
INSTALL = "install bubblewrap (apt-get install bubblewrap) or run without --bench-netns"


def inside() -> bool:
    return os.environ.get(NETNS_ENV) == "1"


def _bwrap() -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise pytest.UsageError(f"--bench-netns needs bubblewrap (bwrap), which is not installed: {INSTALL}")
    return [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--"]


def _check(prefix: list[str]) -> None:
    """Fail in one line, before pytest is started again, where namespaces cannot be made here."""
    try:
        done = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise pytest.UsageError(f"--bench-netns: bubblewrap could not start ({exc}); {INSTALL}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
        raise pytest.UsageError(
            f"--bench-netns: no network namespace can be made here ({why}); allow unprivileged user namespaces "
            "(docs/security.md) or run without it"
        )


def reexec(config: pytest.Config, record_mode: str) -> None:
    """Start this pytest session again inside a new network namespace (does not return), unless it is inside."""
    if inside():
        return
    if record_mode != "none":
        raise pytest.UsageError(f"--bench-netns replays only (record mode {record_mode}): record without it")
    prefix = _bwrap()
    _check(prefix)
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()  # the new pytest writes to the real stdout, not to this one's capture files
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[NETNS_ENV] = "1"
    os.execv(prefix[0], [*prefix, *sys.orig_argv])
