"""The plugin's options (command line and ini) and the `bench` marker's per-test overrides, as typed settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

# pytest-recording's names and meanings (docs/pytest.md has the table).
RECORD_MODES = ("none", "once", "new_episodes", "all")
OPENAI_ENV = ("test", "session", "off")
DEFAULT_UPSTREAM = "https://api.openai.com/v1"
# What a replaying test's client sends as its key: the SDKs refuse to start without one, and a real key has no
# business going anywhere while nothing is forwarded.
DUMMY_KEY = "sk-bench-replay-no-key-needed"
MARKER_OPTIONS = ("cassette", "record_mode", "pace", "openai_env", "allow_network", "allow_errors", "depends_on")
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_AGE_UNITS = {"": 86400.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


class Settings(msgspec.Struct, frozen=True):
    """The run's settings, from the command line over the ini file."""

    record_mode: str
    cassette_dir: str  # beside each test file: <test dir>/<cassette_dir>/<module>/<test>.cassette
    upstream: str
    pace: str
    openai_env: str
    fail_on_unused: bool
    max_age_s: float | None  # cassettes older than this are flagged stale; None: no limit


class TestSettings(msgspec.Struct, frozen=True):
    """One test's settings: the run's, with its `bench` marker's overrides."""

    cassette: Path
    record_mode: str
    pace: str
    openai_env: bool
    allow_network: bool
    # The test records the upstream's error answers on purpose: `once` replays them without failing it.
    allow_errors: bool
    depends_on: tuple[str, ...]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("bench", "record and replay LLM traffic through bench (docs/pytest.md)")
    group.addoption(
        "--bench-record-mode",
        choices=RECORD_MODES,
        default=None,
        help="none (default): replay only, a request not recorded fails the test; once: record tests that have no "
        "cassette; new_episodes: replay what matches, record the rest; all: record everything again",
    )
    group.addoption("--bench-upstream", default=None, help="the server to record from (default: bench_upstream)")
    group.addoption("--bench-pace", default=None, help="replay speed: instant (default), realtime or xN")
    group.addoption(
        "--bench-openai-env",
        choices=OPENAI_ENV,
        default=None,
        help="set OPENAI_BASE_URL (and a dummy OPENAI_API_KEY when replaying) for each bench test (test, default), "
        "for the whole run (session: clients created at import time work too), or not at all (off)",
    )
    group.addoption(
        "--bench-fail-on-unused",
        action="store_true",
        default=None,
        help="fail a replaying test whose cassette holds an exchange it never asked for",
    )
    group.addoption(
        "--bench-netns",
        action="store_true",
        default=False,
        help="replay the whole session in a network namespace of its own (bubblewrap): no process of it reaches "
        "anything but its own loopback; stronger than the in-process block (docs/pytest.md)",
    )
    parser.addini("bench_record_mode", "default record mode (none, once, new_episodes, all)", default="none")
    parser.addini("bench_cassette_dir", "cassettes folder, relative to each test file's folder", default="cassettes")
    parser.addini(
        "bench_upstream",
        "the OpenAI-compatible server to record from (default: $OPENAI_BASE_URL, else the OpenAI API)",
        default="",
    )
    parser.addini("bench_pace", "replay speed: instant, realtime or xN", default="instant")
    parser.addini("bench_openai_env", "test, session or off (see --bench-openai-env)", default="test")
    parser.addini("bench_fail_on_unused", "fail tests that leave recorded exchanges unused", type="bool", default=False)
    parser.addini("bench_max_age", "flag cassettes older than this (30d, 12h, 2w; empty: never)", default="")


def parse_age(text: str) -> float | None:
    if not text.strip():
        return None
    match = _AGE.match(text.lower())
    if match is None:
        raise pytest.UsageError(f"bad bench_max_age {text!r}; give a number with a unit, e.g. 30d, 12h or 2w")
    return float(match.group(1)) * _AGE_UNITS[match.group(2)]


def check_pace(pace: str, where: str) -> str:
    from bench.core.errors import BenchError
    from bench.proxy.recordings import parse_pace  # light: no aiohttp

    try:
        parse_pace(pace)
    except BenchError:
        raise pytest.UsageError(
            f"bad {where} {pace!r}; use instant, realtime or xN (x2 replays twice as fast)"
        ) from None
    return pace


def read_settings(config: pytest.Config, environ: dict[str, str]) -> Settings:
    from bench.core.close_level import close_level_setting
    from bench.core.errors import BenchError

    try:
        close_level_setting()  # refused when pytest starts, not when a cassette closes
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None

    def pick(option: str, ini: str) -> Any:
        value = config.getoption(option)
        return config.getini(ini) if value is None else value

    record_mode = str(pick("bench_record_mode", "bench_record_mode"))
    if record_mode not in RECORD_MODES:
        raise pytest.UsageError(f"bad bench_record_mode {record_mode!r}; use one of {', '.join(RECORD_MODES)}")
    openai_env = str(pick("bench_openai_env", "bench_openai_env"))
    if openai_env not in OPENAI_ENV:
        raise pytest.UsageError(f"bad bench_openai_env {openai_env!r}; use one of {', '.join(OPENAI_ENV)}")
    upstream = str(pick("bench_upstream", "bench_upstream") or "") or environ.get("OPENAI_BASE_URL") or DEFAULT_UPSTREAM
    return Settings(
        record_mode=record_mode,
        cassette_dir=str(config.getini("bench_cassette_dir")),
        upstream=upstream,
        pace=check_pace(str(pick("bench_pace", "bench_pace")), "--bench-pace"),
        openai_env=openai_env,
        fail_on_unused=bool(pick("bench_fail_on_unused", "bench_fail_on_unused")),
        max_age_s=parse_age(str(config.getini("bench_max_age"))),
    )


def safe_name(name: str) -> str:
    """A test name as a file name: parametrized ids keep their letters, digits and -_.=, the rest becomes _."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("._") or "test"


def test_settings(item: pytest.Item, run: Settings) -> TestSettings:
    options: dict[str, Any] = {}
    # The closest marker wins (the test's over its class's over its module's).
    for marker in reversed(list(item.iter_markers("bench"))):
        if marker.args:
            options["cassette"] = marker.args[0]
        options.update(marker.kwargs)
    unknown = sorted(set(options) - set(MARKER_OPTIONS))
    if unknown:
        raise pytest.UsageError(
            f"{item.nodeid}: unknown bench marker option {unknown[0]!r}; use {', '.join(MARKER_OPTIONS)}"
        )
    record_mode = str(options.get("record_mode", run.record_mode))
    if record_mode not in RECORD_MODES:
        raise pytest.UsageError(f"{item.nodeid}: bad record_mode {record_mode!r}; use one of {', '.join(RECORD_MODES)}")
    path = Path(str(item.path))
    folder = path.parent / run.cassette_dir
    named = options.get("cassette")
    if named is None:
        cassette = folder / safe_name(path.stem) / f"{safe_name(item.name)}.cassette"
    else:
        given = Path(str(named))
        cassette = given if given.is_absolute() else folder / given
        if cassette.suffix != ".cassette":
            cassette = cassette.with_name(cassette.name + ".cassette")
    depends = options.get("depends_on", ())
    if isinstance(depends, str | Path):
        depends = (depends,)
    return TestSettings(
        cassette=cassette,
        record_mode=record_mode,
        pace=check_pace(str(options.get("pace", run.pace)), f"{item.nodeid}: bench pace"),
        openai_env=bool(options.get("openai_env", run.openai_env != "off")),
        allow_network=bool(options.get("allow_network", False)),
        allow_errors=bool(options.get("allow_errors", False)),
        depends_on=tuple(str(d) for d in depends),
    )
