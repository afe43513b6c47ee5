"""Run untrusted programs from model answers with limits (docs/scorer.md, "Code execution", says exactly what is
and is not isolated).

Each run: a fresh temporary directory as cwd and HOME; a minimal environment; stdout/stderr written to files capped
by RLIMIT_FSIZE; rlimits on CPU time, address space, processes, file size and open files set in the child before
exec; its own session so a timeout kills the whole process group; no network when `unshare -rn` works here (a new
user and network namespace with only a down loopback); and, when bench runs as root, the program runs as `nobody`
so that the process limit applies (the kernel exempts root from RLIMIT_NPROC) and it cannot write the user's files.
A semaphore caps how many programs run at once across all scorer processes.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import pwd
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

NOBODY = "nobody"
MAX_OUTPUT = 1 << 20


class _Semaphore(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float | None = ...) -> bool: ...
    def release(self) -> None: ...


_slots: _Semaphore = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


def set_semaphore(sem: _Semaphore) -> None:
    """Share one semaphore across worker processes (the pipeline installs a multiprocessing one)."""
    global _slots
    _slots = sem


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0
    memory_bytes: int = 512 << 20
    processes: int = 64
    file_bytes: int = MAX_OUTPUT
    open_files: int = 64


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    output_limited: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        if self.timed_out:
            return "killed: time limit"
        if self.output_limited:
            return "killed: output/file size limit"
        if self.exit_code is not None and self.exit_code < 0:
            return f"killed by signal {signal.Signals(-self.exit_code).name}"
        tail = self.stderr.strip().splitlines()[-1:] if self.stderr.strip() else []
        return f"exit {self.exit_code}" + (f": {tail[0][:200]}" if tail else "")


def _nobody() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(NOBODY)
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def _user_process_count(uid: int) -> int:
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    n += 1
    return n


def _rlimits(limits: Limits, nproc: int) -> list[tuple[str, int, int]]:
    """(name, soft, hard) of every limit a program runs under: RLIMIT_<NAME> for setrlimit, --<name> for prlimit.
    One list for both ways a program is started, so they cannot set different limits."""
    cpu = math.ceil(limits.timeout_s) + 1
    return [
        ("CPU", cpu, cpu + 1),
        ("AS", limits.memory_bytes, limits.memory_bytes),
        ("FSIZE", limits.file_bytes, limits.file_bytes),
        ("NOFILE", limits.open_files, limits.open_files),
        ("NPROC", nproc, nproc),
        ("CORE", 0, 0),
    ]


def _preexec(limits: Limits, user: tuple[int, int] | None, nproc: int) -> Callable[[], None]:
    rlimits = [(getattr(resource, f"RLIMIT_{name}"), soft, hard) for name, soft, hard in _rlimits(limits, nproc)]

    def setup() -> None:
        for which, soft, hard in rlimits:
            resource.setrlimit(which, (soft, hard))
        if user is not None:
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])

    return setup


def _nproc_limit(limits: Limits, user: tuple[int, int] | None) -> int:
    # RLIMIT_NPROC counts every process of the real user, so the limit sits above what that user runs now: for the
    # sandbox user too, since other sandboxes (rescore --jobs N, several rescores at once) run as the same user, and
    # a limit at `limits.processes` alone made their programs' exec fail with EAGAIN under load.
    uid = user[0] if user is not None else os.getuid()
    return _user_process_count(uid) + limits.processes


@functools.cache
def network_isolation() -> bool:
    """Whether `unshare -rn` works here for the sandbox user (probed once per process)."""
    if shutil.which("unshare") is None:
        return False
    try:
        r = _spawn(["unshare", "-rn", "true"], Path(tempfile.gettempdir()), b"", Limits(timeout_s=5), net=False)
    except OSError:
        return False
    return r.exit_code == 0


@functools.cache
def _launchers() -> tuple[str, str] | None:
    """util-linux's prlimit and setpriv, when both are here: the limits and the user are set by them, between exec
    calls, instead of by Python code in the forked child. A `preexec_fn` makes subprocess fork the whole parent (a
    scorer inside a large process: 35 ms a program from a 300 MB one, against 3.5 ms for this chain)."""
    prlimit, setpriv = shutil.which("prlimit"), shutil.which("setpriv")
    return (prlimit, setpriv) if prlimit is not None and setpriv is not None else None


def _launched(
    cmd: list[str], launchers: tuple[str, str], limits: Limits, user: tuple[int, int] | None, nproc: int, path: str
) -> list[str]:
    """`cmd` behind setpriv (to become the sandbox user, when bench runs as root) and prlimit: the same user and
    limits as _preexec. The user comes first and the limits after, as that user (lowering a limit needs no
    privilege): the kernel fails an exec with EAGAIN only for a process that was over RLIMIT_NPROC when its user
    changed, so no exec in this chain can fail for want of processes (the program's own forks are limited as
    before). Any other failure of a launcher (a program that cannot be executed) is the program's result, as
    unshare's always were: nothing the program can print is read as the launchers' own message."""
    program = cmd[0] if "/" in cmd[0] else shutil.which(cmd[0], path=path)
    if program is None:
        # What Popen raises for a missing program: the launcher would only print it.
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
    prlimit, setpriv = launchers
    chain = [] if user is None else [setpriv, f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"]
    chain += [prlimit, *(f"--{name.lower()}={soft}:{hard}" for name, soft, hard in _rlimits(limits, nproc)), "--"]
    return [*chain, program, *cmd[1:]]


def _spawn(argv: Sequence[str], cwd: Path, stdin: bytes, limits: Limits, *, net: bool) -> RunResult:
    user = _nobody()
    cmd = (["unshare", "-rn", *argv]) if net else list(argv)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TZ": "UTC",  # answers that print dates print the same on every machine
        "HOME": str(cwd),
        "TMPDIR": str(cwd),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }
    nproc = _nproc_limit(limits, user)
    launchers = _launchers()
    out_path, err_path, in_path = cwd / ".stdout", cwd / ".stderr", cwd / ".stdin"
    in_path.write_bytes(stdin)
    with open(out_path, "wb") as out, open(err_path, "wb") as err, open(in_path, "rb") as given:
        proc = subprocess.Popen(
            cmd if launchers is None else _launched(cmd, launchers, limits, user, nproc, env["PATH"]),
            cwd=cwd,
            env=env,
            stdin=given,
            stdout=out,
            stderr=err,
            preexec_fn=_preexec(limits, user, nproc) if launchers is None else None,
            start_new_session=True,  # before any preexec_fn, in the child
            close_fds=True,
        )
        timed_out = True
        try:
            timed_out = not _exited_within(proc, limits.timeout_s)
        finally:
            # The whole session: children of a fork bomb included.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Python ignores SIGXFSZ and fails its write with EFBIG instead: a file at the cap is the sign of either.
    full = max(out_path.stat().st_size, err_path.stat().st_size) >= limits.file_bytes
    stdout = out_path.read_bytes()[:MAX_OUTPUT].decode("utf-8", "replace")
    stderr = err_path.read_bytes()[:MAX_OUTPUT].decode("utf-8", "replace")
    code = proc.returncode
    return RunResult(
        exit_code=code,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out or code == -signal.SIGXCPU,
        output_limited=code == -signal.SIGXFSZ or full,
    )


def _exited_within(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether the program ended within the time limit, told the moment it ends. `Popen.wait(timeout)` polls with
    sleeps of up to 50 ms: most programs from answers end in a few milliseconds, so a rescore spent a third of its
    time asleep here. A pidfd becomes readable when the process exits."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:  # a kernel before 5.3, or the process already reaped
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        return bool(select.select([pidfd], [], [], timeout_s)[0])
    finally:
        os.close(pidfd)


# Waits (seconds) before each new try of a program that could not start for want of processes.
SPAWN_RETRIES = (0.05, 0.2, 0.5, 1.0, 2.0)


class Sandbox:
    """A temporary directory (owned by the sandbox user) in which programs run under limits."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
        user = _nobody()
        if user is not None:
            os.chown(self.dir, *user)

    def write(self, name: str, text: str) -> Path:
        path = self.dir / name
        path.write_text(text, encoding="utf-8")
        return path

    def run(self, argv: Sequence[str], *, stdin: str = "", limits: Limits | None = None) -> RunResult:
        limits = limits or Limits()
        _slots.acquire()
        try:
            for delay in SPAWN_RETRIES:
                try:
                    return _spawn(argv, self.dir, stdin.encode(), limits, net=network_isolation())
                except BlockingIOError:
                    # EAGAIN: the machine (or the sandbox user) is at its process limit for a moment, because of
                    # other sandboxes' programs; a program that could not start has not run, so running it again
                    # is safe. Past the last retry the error goes up.
                    time.sleep(delay)
            return _spawn(argv, self.dir, stdin.encode(), limits, net=network_isolation())
        finally:
            _slots.release()

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.cache
def python_interpreter() -> str | None:
    """An interpreter the sandbox user can execute (a pyenv under /root is not readable by `nobody`)."""
    candidates = [sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"]
    for candidate in dict.fromkeys(c for c in candidates if c and os.path.exists(c)):
        with Sandbox() as box:
            if box.run([candidate, "-c", "pass"], limits=Limits(timeout_s=10)).ok:
                return candidate
    return None


@functools.cache
def c_compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def run_python(code: str, stdin: str, timeout_s: float, **limits: Any) -> RunResult | None:
    """None when no usable interpreter exists (the check is then skipped, never zero)."""
    python = python_interpreter()
    if python is None:
        return None
    with Sandbox() as box:
        box.write("main.py", code)
        return box.run([python, "-I", "main.py"], stdin=stdin, limits=Limits(timeout_s=timeout_s, **limits))


def run_c(source: str, stdin: str, timeout_s: float, *, compiler: str | None = None) -> tuple[str, RunResult] | None:
    """("compile"|"run", result), or None when there is no C compiler."""
    cc = compiler if compiler is not None else c_compiler()
    if cc is None or shutil.which(cc) is None:
        return None
    with Sandbox() as box:
        box.write("main.c", source)
        # The compiler needs more memory and processes (cc1, as, ld) than the program it builds.
        build = box.run(
            [cc, "-O1", "-std=c11", "-w", "-o", "main", "main.c", "-lm"],
            limits=Limits(timeout_s=30, memory_bytes=2 << 30, file_bytes=64 << 20),
        )
        if not build.ok:
            return "compile", build
        return "run", box.run(["./main"], stdin=stdin, limits=Limits(timeout_s=timeout_s))
