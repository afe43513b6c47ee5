"""The `bench` command line wiring: every command registered in order, errors turned into a line and an exit code."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from bench import __version__, cli
from bench.core.errors import BenchError

COMMANDS = ["proxy", "cassette", "catalog", "record", "doctor", "sim", "demo", "rescore", "report", "compare", "health"]


def test_help_lists_every_command_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2  # no command: the help, and the usage-error exit code
    printed = capsys.readouterr().out
    assert printed.startswith("usage: bench") and "Record LLM gateway traffic once" in printed
    positions = [printed.index(f"\n    {name} ") for name in COMMANDS]
    assert positions == sorted(positions)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"bench {__version__}\n"


def handler_raising(exc: BaseException | None, result: int | None = None) -> argparse.ArgumentParser:
    def handler(_args: argparse.Namespace) -> int | None:
        if exc is not None:
            raise exc
        return result

    parser = argparse.ArgumentParser()
    parser.set_defaults(handler=handler)
    return parser


@pytest.mark.parametrize(
    ("exc", "result", "code", "stderr"),
    [
        (BenchError("no cassettes in x; record first"), None, 1, "bench: error: no cassettes in x; record first\n"),
        (KeyboardInterrupt(), None, 130, "bench: interrupted\n"),
        (BrokenPipeError(), None, 0, ""),
        (None, None, 0, ""),
        (None, 3, 3, ""),
    ],
)
def test_errors_become_one_line_and_an_exit_code(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException | None,
    result: int | None,
    code: int,
    stderr: str,
) -> None:
    monkeypatch.setattr(cli, "build_parser", lambda: handler_raising(exc, result))
    assert cli.main([]) == code
    assert capsys.readouterr().err == stderr


def test_a_bug_is_not_hidden_as_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "build_parser", lambda: handler_raising(ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        cli.main([])


def test_python_dash_m_bench_runs_the_same_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"bench {__version__}\n"


def test_the_parser_names_the_command_slot() -> None:
    parser = cli.build_parser()
    assert parser.description == "Record LLM gateway traffic once, re-score it forever."
    assert parser.format_usage() == "usage: bench [-h] [--version] COMMAND ...\n"
    assert parser.parse_args(["catalog", "ls"]).command == "catalog"


def test_the_handler_gets_the_parsed_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[argparse.Namespace] = []
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", default="1")
    parser.set_defaults(handler=lambda args: seen.append(args))
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main(["--x", "7"]) == 0
    assert [a.x for a in seen] == ["7"]


def test_an_unknown_option_of_a_command_is_said_with_that_command_s_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["report", "scores.jsonl", "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: bench report ") and err.rstrip().endswith(
        "bench report: error: unrecognized arguments: --bogus"
    )
    with pytest.raises(SystemExit):
        cli.main(["--bogus"])
    assert capsys.readouterr().err.startswith("usage: bench [-h]")
