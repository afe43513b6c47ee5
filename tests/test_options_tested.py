"""Every option of every `bench` command is exercised by some test: an option no test names is one whose wiring could
break unseen (a flag parsed but never passed on). The check is by name: a test file must pass the option string
(any of its spellings) to the command; what the test asserts about it is the test's own business."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from bench.cli import build_parser

TESTS = Path(__file__).resolve().parent

# Options that cannot be exercised here, each with the reason. Keep it short: an entry is a gap, not a convenience.
UNTESTABLE: dict[tuple[str, str], str] = {}


def options(parser: argparse.ArgumentParser, command: str = "bench") -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options(sub, f"{command} {name}")
        elif action.option_strings and not isinstance(action, argparse._HelpAction):
            yield command, action


def test_every_option_is_named_by_a_test() -> None:
    here = Path(__file__).resolve()
    text = "\n".join(p.read_text() for p in TESTS.rglob("*.py") if p.resolve() != here)
    seen = list(options(build_parser()))
    assert len(seen) > 50  # the walk reaches every command's options, not only the top level's
    missing = [
        f"{command} {'/'.join(action.option_strings)}"
        for command, action in seen
        if not any(re.search(re.escape(o) + r"(?![\w-])", text) for o in action.option_strings)
        and (command, action.option_strings[-1]) not in UNTESTABLE
    ]
    assert not missing, f"options no test passes: {missing}"
