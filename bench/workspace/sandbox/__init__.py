"""Run untrusted programs (model answers, recorded tool calls) in a bubblewrap sandbox: one way for every code bench
runs on a model's behalf. docs/security.md says what it guarantees and what it does not.

Each run: its own user, PID, network, IPC and UTS namespaces; a file-system view built from scratch (read-only
system directories, the workspace at /workspace, a tmpfs /tmp); a fixed environment; rlimits set inside; output read
from pipes with a bound; a wall-clock deadline after which every process of the run is killed. Where bubblewrap is
missing or cannot create namespaces, running raises SandboxUnavailable saying how to fix it: never an unsandboxed run.
"""

from bench.workspace.sandbox.box import Sandbox, require, set_semaphore, unavailable
from bench.workspace.sandbox.languages import Interpreter, c_compiler, python_interpreter, run_c, run_python
from bench.workspace.sandbox.limits import MAX_OUTPUT, Limits, RunResult, SandboxUnavailable
from bench.workspace.sandbox.user import hand_over
from bench.workspace.sandbox.view import MOUNT

__all__ = [
    "MAX_OUTPUT",
    "MOUNT",
    "Interpreter",
    "Limits",
    "RunResult",
    "Sandbox",
    "SandboxUnavailable",
    "c_compiler",
    "hand_over",
    "python_interpreter",
    "require",
    "run_c",
    "run_python",
    "set_semaphore",
    "unavailable",
]
