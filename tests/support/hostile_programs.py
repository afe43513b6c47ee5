"""Hostile programs from issue 31, each run the ways bench runs a model's code: a code check (`python_output`), a
recorded `run_command` replayed by the scorer (as `bench rescore` does, and the driver at record time), and a
workspace check reading what the program left. Each scenario sets up its own bait (a key in the environment, a
private file, a loopback service...) as whichever user runs it, and returns the breaches it saw: [] when it held.

Run one in a fresh process: `python -m tests.support.hostile_programs NAME` prints the breaches as JSON. The tests
(tests/bench/workspace/test_hostile_programs.py) run each as the current user and, when that is root, as an
ordinary user too, with a deadline: a scenario that hangs bench fails instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.catalog.model import Check, Workspace
from bench.scorer.checks import run_check
from bench.scorer.context import EvalContext
from bench.scorer.workspace_replay import replay_workspace
from bench.workspace import sandbox
from tests.scorer.helpers import call, spec, turn

# The rescoring shell's key: set in the environment this process started with (so it is in /proc/PID/environ too).
TOKEN = os.environ.get("BENCH_API_KEY") or f"hostile-{uuid.uuid4().hex}"
SCENARIOS: dict[str, Callable[[], list[str]]] = {}
AGENT = spec(id="t.agent", workspace=Workspace(fixture="minilib", tools=("run_command",), allow_commands=("python3",)))


def scenario(fn: Callable[[], list[str]]) -> Callable[[], list[str]]:
    SCENARIOS[fn.__name__] = fn
    return fn


def code_check(program: str, timeout: float = 5.0) -> str:
    """What a code check's program printed (stdout and stderr)."""
    result = sandbox.run_python(program, "", timeout)
    assert result is not None
    return result.stdout + result.stderr


def replayed(program: str, check: Check | None = None) -> tuple[str, str]:
    """A recorded `run_command` of `python3 -c PROGRAM` replayed as the scorer does; (its output, the detail of
    `check` scored on the workspace afterwards)."""
    turns = [turn("", [call("run_command", {"command": ["python3", "-c", program]})], n=0), turn("done", n=1)]
    ws = replay_workspace(AGENT, turns)
    try:
        output = ws.results[0][1].output + (ws.results[0][1].error or "")
        if check is None:
            return output, ""
        ctx = EvalContext(AGENT, turns, workspace_factory=lambda: ws)
        s = run_check(ctx, 0, check)
        return output, f"{s.score} {s.detail}"
    finally:
        ws.close()


def _leaked(where: str, text: str, secret: str = TOKEN) -> list[str]:
    return [f"{where}: {text[:200]!r}"] if secret in text else []


# Each find is printed at once (a search cut short by its time limit has still said what it found), with the bytes
# around it: a breach shows the secret itself in the output. The program looks for the key by its variable's name
# and for the private file's content; neither is in the program's own text (its command line holds the token, so
# command lines are not searched) nor in its own files (/workspace is not walked).
SEARCH = """
import os
secret = {token!r}.encode()
def found(where, data, needle):
    at = data.find(needle)
    if at >= 0:
        print('FOUND', where, data[max(0, at - 16):at + 80], flush=True)
for path in {paths!r}:
    try:
        found(path, open(path, 'rb').read(), b'')
    except OSError:
        pass
found('environ', repr(dict(os.environ)).encode(), b'BENCH_API_KEY')
for pid in os.listdir('/proc'):
    try:
        found(f'/proc/{{pid}}/environ', open(f'/proc/{{pid}}/environ', 'rb').read(), b'BENCH_API_KEY=')
    except OSError:
        pass
seen = 0
for top in ('/tmp', '/root', '/home', '/work', '/run', '/var/tmp'):
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames:
            seen += 1
            if seen > 20000:
                break
            try:
                with open(os.path.join(dirpath, name), 'rb') as fh:
                    found(os.path.join(dirpath, name), fh.read(1 << 16), secret)
            except OSError:
                pass
print('searched', seen)
"""


@scenario
def parent_key() -> list[str]:
    """The key of the shell that runs bench (record or rescore) never reaches a program."""
    assert os.environ.get("BENCH_API_KEY") == TOKEN, "run with BENCH_API_KEY set, as the tests do"
    program = SEARCH.format(token="not-searched", paths=[])
    breaches = _leaked("code check", code_check(program, timeout=20))
    output, _ = replayed(program)
    return breaches + _leaked("replayed run_command", output)


def _private_file(mode: int = 0o600) -> Path:
    """A file holding the token reversed (so that the program's own text, which names what it looks for, never
    holds what it finds)."""
    where = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    secret = where / "secret.txt"
    secret.write_text(TOKEN[::-1])
    secret.chmod(mode)
    return secret


@scenario
def private_file() -> list[str]:
    """A file only the user running bench may read (root's 0600 file, or an ordinary user's own) stays unseen,
    read directly, found by a walk, or through a link a program leaves for a workspace check to follow."""
    secret = _private_file()
    program = SEARCH.format(token=TOKEN[::-1], paths=[str(secret)])
    breaches = _leaked("code check", code_check(program, timeout=20), TOKEN[::-1])
    output, _ = replayed(program)
    breaches += _leaked("replayed run_command", output, TOKEN[::-1])
    plant = f"import os\nos.symlink({str(secret)!r}, 'leak.txt')\n"
    _, detail = replayed(plant, Check(evaluator="file_contains", args={"path": "leak.txt", "regex": "-elitsoh$"}))
    if detail.startswith("1.0"):
        breaches.append(f"file_contains followed a link out of the workspace: {detail}")
    return breaches


@scenario
def truncate_file() -> list[str]:
    """A file of the user running bench that a program names, or links to under the names bench writes (the old
    sandbox's .stdin/.stdout, main.py), or a daemon waits to truncate, keeps its content."""
    where = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    where.chmod(0o755)
    target = where / "precious.txt"
    target.write_text("intact\n")
    target.chmod(0o644)
    program = (
        "import os, time\n"
        f"t = {str(target)!r}\n"
        "for f in (lambda: open(t, 'w').close(), lambda: os.truncate(t, 0)):\n"
        "    try:\n        f(); print('TRUNCATED')\n    except OSError:\n        pass\n"
        "for name in ('.stdin', '.stdout', '.stderr', 'main.py', 'main.c', 'main'):\n"
        "    try:\n        os.remove(name)\n    except OSError:\n        pass\n"
        "    try:\n        os.symlink(t, name)\n    except OSError:\n        pass\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    for _ in range(200):\n"
        "        try:\n            os.truncate(t, 0)\n        except OSError:\n            pass\n"
        "        time.sleep(0.01)\n"
        "    os._exit(0)\n"
    )
    code_check(program)
    replayed(program)
    code_check("print('a later program')")
    replayed("print('a later program')")
    content = target.read_text()
    return [] if content == "intact\n" else [f"precious.txt now holds {content!r}"]


@scenario
def loopback_tcp() -> list[str]:
    """A TCP service on 127.0.0.1 of the machine running bench is out of reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    port = server.getsockname()[1]
    program = (
        "import socket\n"
        "s = socket.socket(); s.settimeout(2)\n"
        f"try:\n    s.connect(('127.0.0.1', {port})); s.sendall(b'hi'); print('CONNECTED')\n"
        "except OSError as e:\n    print('refused', e)\n"
    )
    outputs = [code_check(program), replayed(program)[0]]
    breaches = [f"program said {o.strip()[:120]!r}" for o in outputs if "CONNECTED" in o]
    try:
        server.accept()
        breaches.append("the loopback service accepted a connection")
    except BlockingIOError:
        pass
    server.close()
    return breaches


@scenario
def unix_socket() -> list[str]:
    """A Unix socket on a file path, and an abstract one, are out of reach."""
    where = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    where.chmod(0o755)
    path = where / "service.sock"
    servers = []
    for address in (str(path), f"\0{TOKEN}"):
        server = socket.socket(socket.AF_UNIX)
        server.bind(address)
        server.listen(8)
        server.setblocking(False)
        servers.append(server)
    path.chmod(0o777)
    program = (
        "import socket\n"
        f"for a in ({str(path)!r}, '\\0{TOKEN}'):\n"
        "    s = socket.socket(socket.AF_UNIX); s.settimeout(2)\n"
        "    try:\n        s.connect(a); print('CONNECTED', repr(a))\n"
        "    except OSError as e:\n        print('refused', e)\n"
    )
    outputs = [code_check(program), replayed(program)[0]]
    breaches = [f"program said {o.strip()[:160]!r}" for o in outputs if "CONNECTED" in o]
    for server in servers:
        try:
            server.accept()
            breaches.append("a Unix socket accepted a connection")
        except BlockingIOError:
            pass
        server.close()
    return breaches


# As a daemon does: its output goes nowhere, so no reader waits for it to end (nothing holds the parent's pipes).
DETACH = "        null = os.open('/dev/null', os.O_RDWR)\n        for fd in (0, 1, 2):\n            os.dup2(null, fd)\n"


def _running_with_token() -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if TOKEN.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


@scenario
def fork_bomb() -> list[str]:
    """A fork bomb is stopped by the process limit, and none of its processes outlives the run."""
    program = (
        "import os, sys, time\n"
        "n = 0\n"
        "while n < 10000:\n"
        "    try:\n        pid = os.fork()\n"
        "    except OSError:\n        print('limited at', n, flush=True); break\n"
        "    if pid == 0:\n"
        f"{DETACH}"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {TOKEN!r}])\n"
        "    n += 1\n"
    )
    # Limited by the kernel (the program sees its fork refused) or, where the kernel exempts the host's root (root's
    # `unshare -r`), by the parent counting the sandbox's processes (the run is killed).
    result = sandbox.run_python(program, "", 10)
    assert result is not None
    held = "limited at" in result.stdout or result.process_limited
    breaches = [] if held else [f"not limited: {result.describe()}"]
    out = replayed(program)[0]
    held = "limited at" in out or "killed: process limit" in out
    breaches += [] if held else [f"not limited in run_command: {out[-200:]!r}"]
    left = _running_with_token()
    return breaches + ([f"{len(left)} processes of the bomb still running"] if left else [])


@scenario
def daemon() -> list[str]:
    """A daemon (double fork, setsid) dies with its run: nothing of it is left to touch later runs."""
    program = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"{DETACH}"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {TOKEN!r}])\n"
        "    os._exit(0)\n"
        "print('parent exits')\n"
    )
    code_check(program)
    replayed(program)
    left = _running_with_token()
    return [f"{len(left)} daemon processes outlived their run"] if left else []


@scenario
def fifo_and_dev_zero() -> list[str]:
    """Outputs replaced by a FIFO or /dev/zero (the old sandbox read .stdout by path), and workspace files that are
    a FIFO or a link to /dev/zero, neither hang bench nor grow its memory: each check ends with a verdict."""
    program = (
        "import os, sys\n"
        "for name in ('.stdout', '.stderr', 'out.txt'):\n"
        "    try:\n        os.remove(name)\n    except OSError:\n        pass\n"
        "os.mkfifo('.stdout'); os.mkfifo('out.txt')\n"
        "os.symlink('/dev/zero', '.stderr'); os.symlink('/dev/zero', 'zero.txt')\n"
        "print('planted')\n"
    )
    breaches = [] if "planted" in code_check(program) else ["the code check's program did not run"]
    for path in ("out.txt", "zero.txt"):
        _, detail = replayed(program, Check(evaluator="file_contains", args={"path": path, "value": "x"}))
        if not detail.startswith("0.0"):
            breaches.append(f"file_contains {path}: {detail}")
    return breaches


def main(name: str) -> None:
    print(json.dumps(SCENARIOS[name]()))


if __name__ == "__main__":
    main(sys.argv[1])
