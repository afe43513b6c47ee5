"""The plugin run by pytest itself (pytester) on a user's test module, against a real aiohttp upstream on loopback."""

from __future__ import annotations

from pathlib import Path

import aiohttp  # noqa: F401 - imported once here: pytester's inline runs keep what was loaded before them
import httpx2  # noqa: F401
import openai  # noqa: F401
import pytest

from bench.core.cassette import read_cassette
from tests.proxy.pytest_plugin.conftest import USER_TESTS, cassettes, leftovers, read_notes
from tests.support.upstream import Upstream

pytest_plugins = ["pytester"]

# Nothing listens there: a test that reached for it would fail.
DEAD = "http://127.0.0.1:9/v1"
ALL = 6


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def test_once_records_then_none_replays_the_same_answers_offline(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path
) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    first = run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}")
    first.assert_outcomes(passed=ALL)
    recorded = read_notes(notes)
    asked = len(upstream.requests)
    assert asked == 8  # 3 repeats + 5 single requests
    names = cassettes(pytester.path)
    assert names == [
        f"cassettes/test_user/test_{n}.cassette"
        for n in sorted(["aiohttp", "async_stream", "httpx", "stream", "sync_repeated", "tool_call"])
    ]
    assert leftovers(pytester.path) == []
    assert "recorded 8 new exchange(s) into 6 cassette(s)" in first.stdout.str()

    again = run(pytester, f"--bench-upstream={DEAD}")  # default mode: none
    again.assert_outcomes(passed=ALL)
    assert len(upstream.requests) == asked
    assert read_notes(notes) == recorded
    # Each repeat of one request gets its own recorded answer, in order (the upstream answered each differently).
    assert len(set(recorded["sync"])) == 3
    assert recorded["tool"] == {"city": "Paris", "unit": "celsius", "days": 3}
    assert "replayed 8 exchange(s) in 6 test(s) at pace instant" in again.stdout.str()

    # once with every cassette present replays only, like none.
    third = run(pytester, "--bench-record-mode=once", f"--bench-upstream={DEAD}")
    third.assert_outcomes(passed=ALL)
    assert read_notes(notes) == recorded


def test_a_request_not_recorded_fails_with_the_nearest_recorded_one(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}", "-k", "stream and not async")
    monkeypatch.setenv("QUESTION", "hello")  # the code under test now asks something else
    result = run(pytester, "-k", "stream and not async")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "nearest recorded: x1 in test_stream.cassette (POST /v1/chat/completions)" in out
    assert "which differs in: body.messages[0].content" in out
    assert "--bench-record-mode=new_episodes" in out


def test_a_miss_the_code_swallows_still_fails_the_test(pytester: pytest.Pytester, notes: Path) -> None:
    pytester.makepyfile(
        test_quiet="""
        import pytest
        from openai import OpenAI

        @pytest.mark.bench
        def test_quiet():
            try:
                OpenAI(max_retries=0).models.list()
            except Exception:
                pass  # code under test that hides errors
        """
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "bench: no cassette" in out and "cassettes/test_quiet/test_quiet.cassette" in out
    assert "record it with --bench-record-mode=once" in out


def test_repeating_a_request_more_often_than_recorded_is_a_miss(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path
) -> None:
    body = """
        import os
        import pytest
        from openai import OpenAI

        @pytest.mark.bench
        def test_twice():
            client = OpenAI(max_retries=0)
            for _ in range(int(os.environ.get("TIMES", "1"))):
                client.models.list()
        """
    pytester.makepyfile(test_twice=body)
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}").assert_outcomes(passed=1)
    pytester.makepyfile(test_twice=body.replace('"1"', '"2"'))
    result = run(pytester)
    result.assert_outcomes(failed=1)
    assert "which differs in: nothing visible (a used-up identical request)" in result.stdout.str()


def test_replaying_blocks_the_network_and_allows_loopback(pytester: pytest.Pytester, notes: Path) -> None:
    pytester.makepyfile(
        test_net="""
        import socket
        import pytest

        @pytest.mark.bench
        def test_outside():
            socket.create_connection(("192.0.2.1", 443), timeout=5)

        @pytest.mark.bench
        def test_outside_swallowed():
            try:
                socket.create_connection(("192.0.2.1", 80), timeout=5)
            except BaseException:
                pass

        @pytest.mark.bench
        def test_loopback(bench_proxy):
            with socket.create_connection(("127.0.0.1", int(bench_proxy.origin.rsplit(":", 1)[1]))):
                pass

        @pytest.mark.bench(allow_network=True)
        def test_allowed():
            with pytest.raises(OSError):
                socket.create_connection(("192.0.2.1", 9), timeout=0.01)

        def test_not_bench():
            with pytest.raises(OSError):
                socket.create_connection(("192.0.2.1", 9), timeout=0.01)
        """
    )
    result = run(pytester, "-rf")
    result.assert_outcomes(failed=2, passed=3)
    out = result.stdout.str()
    assert "test_net.py::test_outside tried to connect to 192.0.2.1:443, off this machine" in out
    assert "test_net.py::test_outside_swallowed tried to connect to 192.0.2.1:80" in out


def test_unused_recordings_are_reported_and_can_fail(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_some="""
        import os
        import pytest
        from openai import OpenAI

        @pytest.mark.bench
        def test_some():
            client = OpenAI(max_retries=0)
            client.models.list()
            if os.environ.get("BOTH"):
                client.embeddings.create(model="test-model", input="hi")
        """
    )
    monkeypatch.setenv("BOTH", "1")
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}").assert_outcomes(passed=1)
    monkeypatch.delenv("BOTH")
    quiet = run(pytester)
    quiet.assert_outcomes(passed=1)
    out = quiet.stdout.str()
    assert "recorded but never requested: 1 exchange(s) in 1 cassette(s)" in out
    assert "test_some.cassette: x2 (POST /v1/embeddings)" in out
    strict = run(pytester, "--bench-fail-on-unused")
    strict.assert_outcomes(failed=1)
    assert "never asked for 1 exchange(s)" in strict.stdout.str()


def test_new_episodes_replays_what_matches_and_records_the_rest(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    args = (f"--bench-upstream={upstream.base_url}", "-k", "sync_repeated")
    run(pytester, "--bench-record-mode=once", *args).assert_outcomes(passed=1)
    first = read_notes(notes)["sync"]
    before = len(upstream.requests)
    monkeypatch.setenv("QUESTION", "hello")
    run(pytester, "--bench-record-mode=new_episodes", *args).assert_outcomes(passed=1)
    assert len(upstream.requests) == before + 3  # only the new question went upstream
    second = read_notes(notes)["sync"]
    cassette = pytester.path / "cassettes/test_user/test_sync_repeated.cassette"
    _, records = read_cassette(cassette)
    assert [r.id for r in records] == ["x1", "x2", "x3", "x4", "x5", "x6"]
    # Both questions replay now, offline.
    run(pytester, f"--bench-upstream={DEAD}", "-k", "sync_repeated").assert_outcomes(passed=1)
    assert read_notes(notes)["sync"] == second
    monkeypatch.delenv("QUESTION")
    run(pytester, f"--bench-upstream={DEAD}", "-k", "sync_repeated").assert_outcomes(passed=1)
    assert read_notes(notes)["sync"] == first
    assert leftovers(pytester.path) == []


def test_all_records_everything_again(pytester: pytest.Pytester, upstream: Upstream, notes: Path) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    args = (f"--bench-upstream={upstream.base_url}", "-k", "sync_repeated")
    run(pytester, "--bench-record-mode=once", *args).assert_outcomes(passed=1)
    first = read_notes(notes)["sync"]
    before = len(upstream.requests)
    run(pytester, "--bench-record-mode=all", *args).assert_outcomes(passed=1)
    assert len(upstream.requests) == before + 3
    second = read_notes(notes)["sync"]
    assert second != first  # the counting upstream answered anew
    _, records = read_cassette(pytester.path / "cassettes/test_user/test_sync_repeated.cassette")
    assert len(records) == 3
    run(pytester, f"--bench-upstream={DEAD}", "-k", "sync_repeated").assert_outcomes(passed=1)
    assert read_notes(notes)["sync"] == second


def test_stale_cassettes_are_flagged(pytester: pytest.Pytester, upstream: Upstream, notes: Path) -> None:
    prompt = pytester.path / "prompt.txt"
    prompt.write_text("Answer briefly.")
    pytester.makepyfile(
        test_prompt="""
        import pytest
        from openai import OpenAI

        @pytest.mark.bench(depends_on=["prompt.txt"])
        def test_prompt():
            OpenAI(max_retries=0).models.list()
        """
    )
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}").assert_outcomes(passed=1)
    fresh = run(pytester)
    fresh.assert_outcomes(passed=1)
    assert "stale cassettes" not in fresh.stdout.str()
    prompt.write_text("Answer at length.")
    changed = run(pytester)
    changed.assert_outcomes(passed=1)
    assert "test_prompt.cassette: recorded with another version of prompt.txt" in changed.stdout.str()
    old = run(pytester, "-o", "bench_max_age=0s")
    assert "days ago (bench_max_age 0d)" in old.stdout.str()


def test_bad_options_are_one_line_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = run(pytester, "--bench-pace=fast")
    assert result.ret != 0
    assert "bad --bench-pace 'fast'; use instant, realtime or xN" in result.stderr.str()
    pytester.makepyfile(
        test_x="""
        import pytest

        @pytest.mark.bench(cassete="x")
        def test_x():
            pass
        """
    )
    result = run(pytester)
    assert "unknown bench marker option 'cassete'" in result.stdout.str() + result.stderr.str()


@pytest.mark.slow
def test_xdist_workers_record_and_replay_their_own_cassettes(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path
) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    first = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}"
    )
    first.assert_outcomes(passed=ALL)
    recorded = read_notes(notes)
    assert len(cassettes(pytester.path)) == ALL
    assert leftovers(pytester.path) == []
    assert "recorded 8 new exchange(s) into 6 cassette(s)" in first.stdout.str()
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", f"--bench-upstream={DEAD}")
    again.assert_outcomes(passed=ALL)
    assert read_notes(notes) == recorded
    assert "replayed 8 exchange(s) in 6 test(s)" in again.stdout.str()


def test_session_env_serves_clients_built_at_import_time(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_module_client="""
        import pytest
        from openai import OpenAI

        CLIENT = OpenAI(max_retries=0)  # built once, at import time

        @pytest.mark.bench
        def test_one(bench_url):
            assert str(CLIENT.base_url).rstrip("/") == bench_url
            CLIENT.models.list()

        @pytest.mark.bench
        def test_two():
            CLIENT.embeddings.create(model="test-model", input="x")
        """
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-user-key-0123456789")
    args = ("--bench-openai-env=session", f"--bench-upstream={upstream.base_url}")
    run(pytester, "--bench-record-mode=once", *args).assert_outcomes(passed=2)
    assert upstream.requests[-1].headers["Authorization"] == "Bearer sk-user-key-0123456789"
    assert len(cassettes(pytester.path)) == 2
    for path in pytester.path.rglob("*.cassette"):
        assert b"sk-user-key" not in path.read_bytes()  # compressed, so also checked in the records below
        _, records = read_cassette(path)
        assert "sk-user-key" not in repr(records)
    run(pytester, *args).assert_outcomes(passed=2)


ASK = """
import os
import pytest
from openai import OpenAI

@pytest.mark.bench
def test_ask():
    try:
        OpenAI(max_retries=int(os.environ.get("RETRIES", "0"))).chat.completions.create(
            model=os.environ.get("MODEL", "test-model"), messages=[{"role": "user", "content": "hi"}]
        )
    except Exception:
        pass  # code under test that hides errors: bench still says what its cassette holds
"""


def test_bench_never_saves_its_own_errors_when_no_upstream_answers(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens at the upstream: the SDK's retries each get bench's own 502, and none is saved.
    pytester.makepyfile(test_ask=ASK)
    monkeypatch.setenv("RETRIES", "2")
    dead = run(pytester, "--bench-record-mode=once", f"--bench-upstream={DEAD}")
    dead.assert_outcomes(passed=1, errors=1)
    assert (
        "bench: test_ask.py::test_ask: the upstream http://127.0.0.1:9/v1 did not answer 3 request(s) (bench's own "
        "502/504, not saved as a recording); start it (or fix bench_upstream / OPENAI_BASE_URL) and run again"
    ) in dead.stdout.str()
    assert cassettes(pytester.path) == [] and leftovers(pytester.path) == []
    # So `once` records at the next run, with the upstream up.
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}").assert_outcomes(passed=1)
    (cassette,) = cassettes(pytester.path)
    assert [r.response.status for r in read_cassette(pytester.path / cassette)[1]] == [200]


def test_an_upstream_error_in_once_mode_fails_the_test_until_it_is_recorded_again(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_ask=ASK)
    monkeypatch.setenv("MODEL", "test-500")
    line = (
        "holds an error answer from the upstream (500 on POST /v1/chat/completions), and `once` replays it every run; "
        "fix the cause (the key, the model name, the server) and record again with --bench-record-mode=all"
    )
    first = run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}")
    first.assert_outcomes(passed=1, errors=1)  # recorded (the upstream's answer), and the test fails on it
    assert line in first.stdout.str()
    again = run(pytester, "--bench-record-mode=once", f"--bench-upstream={DEAD}")
    again.assert_outcomes(errors=1)  # every replay of it fails before the test body runs
    assert line in again.stdout.str()
    asked = len(upstream.requests)
    monkeypatch.setenv("MODEL", "test-model")
    run(pytester, "--bench-record-mode=all", f"--bench-upstream={upstream.base_url}").assert_outcomes(passed=1)
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={DEAD}").assert_outcomes(passed=1)
    assert len(upstream.requests) == asked + 1


def test_a_test_that_records_an_error_on_purpose_says_so_in_its_marker(
    pytester: pytest.Pytester, upstream: Upstream, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_ask=ASK.replace("@pytest.mark.bench", "@pytest.mark.bench(allow_errors=True)"))
    monkeypatch.setenv("MODEL", "test-500")
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={upstream.base_url}").assert_outcomes(passed=1)
    run(pytester, "--bench-record-mode=once", f"--bench-upstream={DEAD}").assert_outcomes(passed=1)


def test_a_library_reaching_out_at_import_is_named_by_test_and_host_with_how_to_allow_it(
    pytester: pytest.Pytester, notes: Path
) -> None:
    # A library that fetches a price table when imported (as litellm does); the name resolves (stand-in DNS, set
    # before bench's lookup note wraps it) to an address off this machine.
    pytester.makepyfile(
        pricey="""
        import urllib.request
        urllib.request.urlopen("http://prices.example.com/model_prices.json", timeout=5)
        """,
        conftest="""
        import socket
        real = socket.getaddrinfo
        def fake(host, *args, **kwargs):
            if host == "prices.example.com":
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.7", 80))]
            return real(host, *args, **kwargs)
        socket.getaddrinfo = fake
        """,
        test_lib="""
        import pytest

        @pytest.mark.bench
        def test_uses_the_library():
            import pricey  # noqa: F401
        """,
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert (
        "bench: test_lib.py::test_uses_the_library tried to connect to prices.example.com (192.0.2.7:80), off this "
        "machine, while it replays from its cassette (nothing may reach the network)."
    ) in out
    assert (
        "If a library reaches out by itself (litellm fetches its model price table when imported), allow it: mark "
        "the test bench(allow_network=True)"
    ) in out
