"""`bench sim` in a process of its own, for benchmarks that load it from another process (so that the simulator's
CPU is not the load generator's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pinned(command: list[str], core: str | None) -> list[str]:
    """The command on one core (`taskset -c CORE`) when a core is given and taskset exists."""
    return ["taskset", "-c", core, *command] if core is not None and shutil.which("taskset") else command


def start_sim_process(port: int, *flags: str, core: str | None = None) -> subprocess.Popen[bytes]:
    """Start `bench sim --port PORT FLAGS...` and wait (60 s at most) until it answers /health."""
    command = [sys.executable, "-m", "bench", "sim", "--port", str(port), *flags]
    proc = subprocess.Popen(pinned(command, core), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("bench sim did not start")
