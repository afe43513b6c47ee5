"""Start one bubblewrap run and collect what it gives back, only through descriptors the parent opened itself.

stdin is a sealed memfd (nothing the program does can change what the parent wrote, and the parent never writes to
a program that does not read); stdout and stderr are pipes read with a bound (past it the run is killed); bwrap's
status comes on a third pipe (`--json-status-fd`), which says whether the sandbox was set up at all and the
program's exit code. Nothing is read by path, so no link, FIFO or device a program leaves behind can redirect,
block or flood the parent. A deadline bounds everything: at it bwrap is killed, and `--die-with-parent` takes the
sandbox's PID 1 and every process of its PID namespace with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bench.workspace.sandbox import user
from bench.workspace.sandbox.limits import Limits, RunResult, SandboxUnavailable
from bench.workspace.sandbox.user import drop_to, launcher
from bench.workspace.sandbox.view import PATH

STATUS_MAX = 1 << 16  # bwrap's status documents: two short JSON objects
DRAIN_S = 2.0  # after bwrap ends, how long its pipes may take to close (its PID namespace is gone by then)


class _Status(msgspec.Struct):
    child_pid: int | None = msgspec.field(default=None, name="child-pid")
    exit_code: int | None = msgspec.field(default=None, name="exit-code")


@dataclass
class _Stream:
    cap: int
    data: bytearray = field(default_factory=bytearray)
    over: bool = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        self.data += chunk[:room]
        self.over = self.over or len(chunk) > room


def _stdin(data: bytes) -> int:
    """A sealed in-memory file holding `data`, positioned at its start."""
    fd = os.memfd_create("bench-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


class _Init:
    """The sandbox's PID 1 (bwrap's init), held by a pidfd once bwrap has named it. When it has ended, so has every
    process of its PID namespace (the kernel kills and reaps them all before PID 1's exit completes); bwrap itself
    may end first, so the parent waits for this, not for bwrap, before it says a run is over."""

    def __init__(self, bwrap_pid: int) -> None:
        self.bwrap_pid = bwrap_pid
        self.fd: int | None = None
        self.pid: int | None = None
        self.looked = False

    def watch(self, status: bytes) -> None:
        if self.looked:
            return
        for found in _statuses(status):
            if found.child_pid is None:
                continue
            self.looked = True
            with contextlib.suppress(OSError):
                fd = os.pidfd_open(found.child_pid)
                # Still bwrap's child, so the descriptor is that process and not a later one with its number.
                if _parent_of(found.child_pid) == self.bwrap_pid:
                    self.fd, self.pid = fd, found.child_pid
                else:
                    os.close(fd)
            return

    def end(self) -> None:
        """Kill the namespace (a no-op when it has ended) and wait, DRAIN_S at most, until it is empty."""
        if self.fd is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            signal.pidfd_send_signal(self.fd, signal.SIGKILL)
        select.select([self.fd], [], [], DRAIN_S)
        os.close(self.fd)
        self.fd = self.pid = None


def _parent_of(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return None


# How often the parent counts the sandbox's processes where the kernel's limit cannot bind (user.limit_exempt).
COUNT_EVERY_S = 0.002


def _tree_size(pid: int, cap: int) -> int:
    """Processes under `pid` (itself included: the sandbox's init, whose tree holds every process of its PID
    namespace, orphans and daemons too), counted up to cap + 1."""
    n, stack = 0, [pid]
    while stack and n <= cap:
        p = stack.pop()
        n += 1
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError, ValueError):
                stack.extend(map(int, Path(f"/proc/{p}/task/{task}/children").read_text().split()))
    return n


@dataclass
class _Outcome:
    timed_out: bool = False
    process_limited: bool = False


def _collect(
    proc: subprocess.Popen[bytes],
    fds: dict[int, _Stream],
    limits: Limits,
    init: _Init,
    status_fd: int,
) -> _Outcome:
    """Read every pipe until all are closed: each is held by bwrap and the sandbox's processes only, so all closed
    means all ended. Kill at the deadline, when a stream passes its cap, or (where the kernel cannot limit them)
    when the processes pass their limit; then read what is left for DRAIN_S at most."""
    stop = time.monotonic() + limits.timeout_s
    counting = user.limit_exempt()
    outcome = _Outcome()
    killed = timed_out = False
    sel = selectors.DefaultSelector()
    for fd in fds:
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            left = stop - time.monotonic()
            if left <= 0:
                if killed:
                    break
                timed_out = killed = True
                _kill(proc)
                stop = time.monotonic() + DRAIN_S
                continue
            over = limits.processes + 1  # the sandbox's init and the program's processes
            if counting and not killed and init.pid is not None and _tree_size(init.pid, over) > over:
                outcome.process_limited = killed = True
                init.end()
                stop = time.monotonic() + DRAIN_S
                continue
            for key, _ in sel.select(min(left, COUNT_EVERY_S) if counting and not killed else left):
                chunk = os.read(int(key.fd), 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                stream = fds[int(key.fd)]
                stream.add(chunk)
                if key.fd == status_fd:
                    init.watch(bytes(stream.data))
                if stream.over and not killed:
                    killed = True
                    _kill(proc)
                    stop = time.monotonic() + DRAIN_S
    finally:
        sel.close()
    outcome.timed_out = timed_out
    return outcome


def spawn(argv_for: Callable[[int], Sequence[str]], stdin: bytes, limits: Limits, *, merge_stderr: bool) -> RunResult:
    """Run the bwrap command `argv_for(status_fd)` returns; SandboxUnavailable when bwrap could not set it up."""
    status_r, status_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = (out_r, out_w) if merge_stderr else os.pipe()
    given = _stdin(stdin) if stdin else None
    ours = {status_r, out_r, err_r}
    try:
        proc = subprocess.Popen(
            [*launcher(drop_to()), *argv_for(status_w)],
            stdin=given if given is not None else subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            pass_fds=(status_w,),
            env={"PATH": PATH},
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in {status_w, out_w, err_w} | ({given} if given is not None else set()):
            os.close(fd)
    out, err, status = _Stream(limits.output_bytes), _Stream(limits.output_bytes), _Stream(STATUS_MAX)
    fds = {out_r: out, status_r: status} | ({} if merge_stderr else {err_r: err})
    init = _Init(proc.pid)
    try:
        outcome = _collect(proc, fds, limits, init, status_r)
    finally:
        init.end()
        try:
            proc.wait(DRAIN_S)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.wait()
        for fd in ours:
            os.close(fd)
    return _result(proc.returncode, out, err, status, outcome)


def _statuses(raw: bytes) -> list[_Status]:
    """bwrap writes its JSON documents one after another on the descriptor."""
    found: list[_Status] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            found.append(msgspec.json.decode(line, type=_Status))
    return found


def _result(code: int, out: _Stream, err: _Stream, status: _Stream, outcome: _Outcome) -> RunResult:
    timed_out = outcome.timed_out
    statuses = _statuses(bytes(status.data))
    stderr = err.data.decode("utf-8", "replace")
    if not any(s.child_pid is not None for s in statuses) and not timed_out:
        # bwrap never started the program: what it printed is its own (the program never ran).
        first = stderr.strip().splitlines()[:1]
        raise SandboxUnavailable(
            f"bubblewrap could not set up the sandbox ({first[0][:200] if first else f'exit {code}'}); "
            "see docs/security.md to enable user namespaces"
        )
    exits = [s.exit_code for s in statuses if s.exit_code is not None]
    killed = timed_out or out.over or err.over or outcome.process_limited
    exit_code: int | None = None if killed else (exits[-1] if exits else code)
    if exit_code is not None and 128 < exit_code <= 128 + 64:
        exit_code = -(exit_code - 128)  # bwrap's init reports a signal as 128 + its number, as a shell does
    return RunResult(
        exit_code=exit_code,
        stdout=out.data.decode("utf-8", "replace"),
        stderr=stderr,
        timed_out=timed_out or exit_code == -signal.SIGXCPU,
        output_limited=out.over or err.over or exit_code == -signal.SIGXFSZ,
        process_limited=outcome.process_limited,
    )
