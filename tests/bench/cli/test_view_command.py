"""`bench view` as a user starts it: a free port printed, the API answering there; off loopback refused untokened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from bench.cli import main


def test_serves_on_a_printed_free_port(smollm2_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "view", str(smollm2_dir / "scores.jsonl"), "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BROWSER": "false"},
    )
    try:
        assert proc.stdout is not None
        assert "result(s) in 1 run(s)" in proc.stdout.readline()
        line = proc.stdout.readline()
        assert line.startswith("bench view: http://127.0.0.1:"), line + (proc.stderr.read() if proc.stderr else "")
        url = line.split()[2]
        assert "token" not in url
        with urllib.request.urlopen(url + "api/runs", timeout=30) as response:
            runs = json.loads(response.read())["runs"]
        assert runs[0]["models"][0]["model"] == "smollm2"
    finally:
        proc.terminate()
        proc.wait(30)


def test_off_loopback_without_a_token_is_one_line(tmp_path: Path, capsys: object) -> None:
    assert main(["view", str(tmp_path), "--host", "0.0.0.0", "--no-open"]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.count("\n") == 1 and "--token-env" in err


def test_nothing_to_show_is_one_line(tmp_path: Path, capsys: object) -> None:
    assert main(["view", str(tmp_path / "missing"), "--no-open"]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.count("\n") == 1 and "no such file" in err


def test_an_impossible_or_busy_port_is_one_line_before_anything_is_loaded(tmp_path: Path, capsys: object) -> None:
    """The port is bound before the results load (a missing path would be said otherwise): an out-of-range port or
    one another program holds is one line naming it and the fix, not a traceback after the whole load."""
    import socket

    missing = str(tmp_path / "missing")
    assert main(["view", missing, "--port", "99999", "--no-open"]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err == "bench: error: --port 99999: give a port from 1 to 65535, or 0 for any free one\n"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", missing, "--port", str(port), "--no-open"]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err == (
        f"bench: error: cannot listen on 127.0.0.1:{port}: already in use by another program; choose another --port "
        "(0: any free one) or --host\n"
    )


def test_the_proxy_refuses_an_impossible_port_in_one_line(capsys: object) -> None:
    assert main(["proxy", "--port", "70000", "--upstream", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err == "bench: error: --port 70000: give a port from 1 to 65535, or 0 for any free one\n"
