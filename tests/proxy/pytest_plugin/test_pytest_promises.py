"""Promises of docs/pytest.md that no other test held: two tests sharing a cassette, a test without requests leaving
no file, `none` without a cassette failing, the environment each test sees and gets back, the fixture's URLs,
`openai_env=False`, an interrupted run keeping the previous cassette, `-p no:bench`, the ini settings, the marker's
arguments and which upstream wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.cassette import read_cassette
from bench.proxy.pytest_plugin.settings import DUMMY_KEY
from tests.proxy.pytest_plugin.conftest import cassettes, leftovers, read_notes
from tests.proxy.pytest_plugin.test_plugin import DEAD, run
from tests.support.upstream import Upstream

pytest_plugins = ["pytester"]

REAL_KEY = "sk-the-users-real-key-0123"
ORIGINAL_URL = "http://127.0.0.1:9/original/v1"

USER = """
import json, os

import pytest
from openai import OpenAI


def note(name, value):
    with open(os.environ["NOTES"], "a") as f:
        f.write(json.dumps([name, value]) + "\\n")


def env():
    return [os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY")]


def ask(text):
    OpenAI(max_retries=0).chat.completions.create(model="test-model", messages=[{"role": "user", "content": text}])


@pytest.mark.bench("shared/one")
def test_a():
    ask("a")


@pytest.mark.bench("shared/one")
def test_b():
    ask("b")


@pytest.mark.bench
def test_silent(bench_proxy):
    note("silent", [*env(), bench_proxy.url, bench_proxy.origin, bench_proxy.replaying, bench_proxy.record_mode])


@pytest.mark.bench(openai_env=False)
def test_env_off(bench_proxy):
    note("off", env())


def test_plain():
    note("plain", env())
"""


@pytest.fixture
def user_env(notes: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_BASE_URL", ORIGINAL_URL)
    monkeypatch.setenv("OPENAI_API_KEY", REAL_KEY)
    return notes


def test_shared_cassettes_environment_and_fixture_urls(
    pytester: pytest.Pytester, upstream: Upstream, user_env: Path
) -> None:
    pytester.makepyfile(test_user=USER)
    # --bench-upstream wins over $OPENAI_BASE_URL (which points nowhere here).
    first = run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}")
    first.assert_outcomes(passed=5)
    # Two tests naming one cassette: both exchanges in one file. Tests that sent nothing: no file.
    assert cassettes(pytester.path) == ["cassettes/shared/one.cassette"] and leftovers(pytester.path) == []
    _, records = read_cassette(pytester.path / "cassettes" / "shared" / "one.cassette")
    assert sorted(r.request.body.decode().split('"content":"')[1][0] for r in records) == ["a", "b"]
    seen = read_notes(user_env)
    url, key, fixture_url, origin, replaying, mode = seen["silent"]
    # Recording keeps the user's key; the base URL is the proxy's, with the upstream's path kept.
    assert key == REAL_KEY and url == fixture_url and replaying is False and mode == "once"
    assert origin.startswith("http://127.0.0.1:") and origin.count("/") == 2 and fixture_url == origin + "/v1"
    # openai_env=False leaves the environment alone, and it is put back for the tests after a bench test.
    assert seen["off"] == seen["plain"] == [ORIGINAL_URL, REAL_KEY]

    again = run(pytester, f"--bench-upstream={DEAD}")  # none: replay only
    again.assert_outcomes(passed=5)
    seen = read_notes(user_env)
    assert seen["silent"][1] == DUMMY_KEY and seen["silent"][4] is True and seen["silent"][5] == "none"
    assert seen["off"] == seen["plain"] == [ORIGINAL_URL, REAL_KEY]


def test_none_without_a_cassette_fails_a_test_that_asks(pytester: pytest.Pytester, user_env: Path) -> None:
    pytester.makepyfile(test_user=USER)
    result = run(pytester, f"--bench-upstream={DEAD}", "-k", "test_a")
    result.assert_outcomes(failed=1)
    assert "only replays" in result.stdout.str() and "shared/one.cassette" in result.stdout.str()
    assert cassettes(pytester.path) == []


INTERRUPTED = """
import pytest
from openai import OpenAI


@pytest.mark.bench
def test_ask():
    OpenAI(max_retries=0).chat.completions.create(model="test-model", messages=[{"role": "user", "content": "x"}])
    if __import__("os").environ.get("STOP"):
        raise KeyboardInterrupt
"""


def test_an_interrupted_run_leaves_the_previous_cassette_as_it_was(
    pytester: pytest.Pytester, upstream: Upstream, user_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_user=INTERRUPTED)
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}").assert_outcomes(passed=1)
    [name] = cassettes(pytester.path)
    before = (pytester.path / name).read_bytes()
    monkeypatch.setenv("STOP", "1")
    # In a process of its own: an inline run's KeyboardInterrupt would stop this test session too.
    flags = ("-p", "no:cacheprovider", "-p", "no:randomly", "--bench-record-mode=all")
    result = pytester.runpytest_subprocess(*flags, f"--bench-upstream={upstream.base_url}", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (pytester.path / name).read_bytes() == before and cassettes(pytester.path) == [name]


def test_no_bench_turns_the_plugin_off(
    pytester: pytest.Pytester, user_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPECTED", ORIGINAL_URL)
    pytester.makepyfile(
        test_user="""
        import os
        import pytest

        @pytest.mark.bench
        def test_untouched():
            assert os.environ["OPENAI_BASE_URL"] == os.environ["EXPECTED"]
        """
    )
    result = run(pytester, "-p", "no:bench", "-W", "ignore::pytest.PytestUnknownMarkWarning")
    result.assert_outcomes(passed=1)
    assert cassettes(pytester.path) == []


def test_a_close_level_that_is_no_zstd_level_stops_pytest_with_one_line(
    pytester: pytest.Pytester, user_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_CLOSE_LEVEL", "max")
    pytester.makepyfile(test_user="def test_x():\n    pass\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: BENCH_CLOSE_LEVEL='max' is not a zstd level: set it to 1-22, off or auto" in result.stderr.lines
    assert "Traceback" not in result.stderr.str()


MARKED = """
import pytest
from openai import OpenAI


def ask():
    OpenAI(max_retries=0).chat.completions.create(model="test-model", messages=[{"role": "user", "content": "x"}])


@pytest.mark.bench
def test_x():
    ask()


@pytest.mark.bench(record_mode="all")
def test_y():
    ask()


@pytest.mark.bench(pace="x1000")
def test_z():
    ask()
"""


def test_ini_settings_marker_arguments_and_upstream_precedence(
    pytester: pytest.Pytester, upstream: Upstream, user_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ini = "[pytest]\nasyncio_default_fixture_loop_scope = function\nbench_record_mode = once\n"
    ini += "bench_cassette_dir = recordings\nbench_upstream = {}\n"
    pytester.makepyfile(test_user=MARKED)
    monkeypatch.setenv("OPENAI_BASE_URL", DEAD)  # the ini's upstream wins over $OPENAI_BASE_URL
    pytester.makeini(ini.format(upstream.base_url))
    before = len(upstream.requests)  # the upstream serves the whole module
    run(pytester).assert_outcomes(passed=3)
    assert cassettes(pytester.path) == [f"recordings/test_user/test_{n}.cassette" for n in "xyz"]
    asked = len(upstream.requests)
    assert asked == before + 3
    # The command line wins over the ini; the marker's record_mode over both; its pace shows in the summary.
    pytester.makeini(ini.format(DEAD))
    again = run(pytester, f"--bench-upstream={upstream.base_url}")
    again.assert_outcomes(passed=3)
    assert len(upstream.requests) == asked + 1  # test_x and test_z replayed (once, with a cassette), test_y recorded
    assert (
        "replayed 2 exchange(s) in 2 test(s) at pace instant, x1000: their timing is the recording's, replayed, "
        "not measured from a model" in again.stdout.str()
    )
