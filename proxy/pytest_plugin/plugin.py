"""The pytest hooks and fixtures (entry point `bench`); docs/pytest.md is the user's guide."""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from bench.proxy.pytest_plugin.network import NetworkBlock
from bench.proxy.pytest_plugin.settings import DUMMY_KEY, Settings, read_settings, test_settings

if TYPE_CHECKING:
    from bench.proxy.pytest_plugin.loop import ProxyLoop
    from bench.proxy.pytest_plugin.recording import TestRecording

REPORT_KEY = "bench"
ENV_NAMES = ("OPENAI_BASE_URL", "OPENAI_API_KEY")


def _put_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


class BenchProxy(msgspec.Struct, frozen=True):
    """What the `bench_proxy` fixture gives a test."""

    url: str  # the base URL for an OpenAI client (the upstream's path included, e.g. http://127.0.0.1:PORT/v1)
    origin: str  # scheme, host and port only, for raw HTTP clients
    cassette: Path
    record_mode: str
    replaying: bool  # answers come only from the cassette; nothing is forwarded


class PluginState:
    """Per pytest process: the settings, the proxy's loop (started on first use), the outcomes to summarize."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.environ = dict(os.environ)  # as the run started: the user's own OPENAI_BASE_URL is the upstream
        self.settings: Settings = read_settings(config, self.environ)
        workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        # pytest-xdist gives every worker of a run the same testrunuid: a cassette written earlier in this run is
        # joined, never replaced, whichever worker wrote it.
        self.session = str(workerinput["testrunuid"]) if workerinput else uuid.uuid4().hex
        self.worker = str(workerinput["workerid"]) if workerinput else "main"
        self._loop: ProxyLoop | None = None
        # Ctrl-C stopped the run: the test in flight when it came is torn down with the session, and what it
        # recorded so far is not committed (the previous cassette stays as it was).
        self.interrupted = False
        self.saved_env: dict[str, str | None] = {}

    @property
    def loop(self) -> ProxyLoop:
        if self._loop is None:
            from bench.proxy.pytest_plugin.loop import ProxyLoop

            self._loop = ProxyLoop()
        return self._loop

    def base_url(self) -> str:
        """The proxy's address with the upstream's path: requests then reach the upstream at the same paths."""
        from yarl import URL

        return self.loop.url + URL(self.settings.upstream).path.rstrip("/")

    def set_env(self, name: str, value: str | None) -> None:
        """Set for the whole run (bench_openai_env = session); put back at its end."""
        if name not in self.saved_env:
            self.saved_env[name] = os.environ.get(name)
        _put_env(name, value)

    def restore_env(self) -> None:
        for name, value in self.saved_env.items():
            _put_env(name, value)
        self.saved_env.clear()

    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    def close(self) -> None:
        self.restore_env()
        if self._loop is not None:
            self._loop.close()
            self._loop = None


_STATE = pytest.StashKey[PluginState]()
_RECORDING = pytest.StashKey["TestRecording"]()
_BLOCK = pytest.StashKey[NetworkBlock]()


def pytest_addoption(parser: pytest.Parser) -> None:
    from bench.proxy.pytest_plugin.settings import add_options

    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "bench(cassette=None, *, record_mode=None, pace=None, openai_env=True, allow_network=False, "
        "allow_errors=False, depends_on=()): "
        "record and replay this test's LLM traffic through bench (docs/pytest.md)",
    )
    state = PluginState(config)
    if config.getoption("bench_netns", False):
        from bench.proxy.pytest_plugin.netns import reexec

        reexec(config, state.settings.record_mode)  # starts pytest again in its own network namespace, once
    config.stash[_STATE] = state
    config.pluginmanager.register(Reporter(), "bench-reporter")
    config.pluginmanager.register(state, "bench-state")  # for its pytest_keyboard_interrupt
    if state.settings.openai_env == "session":
        state.set_env("OPENAI_BASE_URL", state.base_url())
        if state.settings.record_mode == "none":
            state.set_env("OPENAI_API_KEY", DUMMY_KEY)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


@pytest.fixture(scope="session")
def bench_url(pytestconfig: pytest.Config) -> str:
    """The proxy's base URL for the whole run (for clients built once per session); requests go to the cassette of
    the bench test running at that moment."""
    return pytestconfig.stash[_STATE].base_url()


@pytest.fixture
def bench_proxy(request: pytest.FixtureRequest) -> Iterator[BenchProxy]:
    """Record or replay this test's traffic through bench; gives the proxy's address and the test's cassette."""
    from bench.core.errors import BenchError
    from bench.proxy.pytest_plugin.recording import TestRecording

    item = request.node
    state = item.config.stash[_STATE]
    settings = test_settings(item, state.settings)
    try:
        recording = TestRecording(
            test=item.nodeid,
            settings=settings,
            run=state.settings,
            root=Path(str(item.config.rootpath)),
            session=state.session,
            worker=state.worker,
        )
        loop = state.loop
        loop.call(recording.start(loop))
    except BenchError as exc:
        pytest.fail(f"bench: {item.nodeid}: {exc}", pytrace=False)
    item.stash[_RECORDING] = recording
    url = state.base_url()
    saved = {name: os.environ.get(name) for name in ENV_NAMES}
    if settings.openai_env:
        os.environ["OPENAI_BASE_URL"] = url
        # Recording forwards the user's own key; without one (a local server needs none) the SDK still needs some.
        key = DUMMY_KEY if recording.replay_only else state.environ.get("OPENAI_API_KEY") or DUMMY_KEY
        _put_env("OPENAI_API_KEY", key)
    block = None
    if recording.replay_only and not settings.allow_network:
        block = NetworkBlock(item.nodeid, recording.fix())
        block.install()
        item.stash[_BLOCK] = block
    try:
        yield BenchProxy(
            url=url,
            origin=loop.url,
            cassette=settings.cassette,
            record_mode=settings.record_mode,
            replaying=recording.replay_only,
        )
    finally:
        if block is not None:
            block.remove()
            recording.outcome.blocked = block.blocked
        for name, value in saved.items():
            _put_env(name, value)
        loop.call(recording.stop(loop))
        if state.interrupted:
            recording.discard()
        else:
            try:
                problems = recording.commit()
            except BenchError as exc:
                pytest.fail(f"bench: {item.nodeid}: could not save its recording: {exc}", pytrace=False)
            if problems:
                pytest.fail("\n".join(f"bench: {item.nodeid}: {p}" for p in problems), pytrace=False)


@pytest.fixture(autouse=True)
def _bench_marked(request: pytest.FixtureRequest) -> None:
    """Tests marked `bench` get the proxy without asking for the fixture."""
    if request.node.get_closest_marker("bench") is not None:
        request.getfixturevalue("bench_proxy")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    recording = item.stash.get(_RECORDING, None)
    if recording is not None:
        if call.when == "call":
            _judge(item, recording, report)
        elif call.when == "teardown":
            report.user_properties.append((REPORT_KEY, msgspec.to_builtins(recording.outcome)))
    return report


def _judge(item: pytest.Item, recording: TestRecording, report: pytest.TestReport) -> None:
    """Fail a test that missed, tried the network or (if asked) left recordings unused, even if it caught the error."""
    problems = list(recording.inspect())
    block = item.stash.get(_BLOCK, None)
    if block is not None:
        problems.extend(m for m in block.blocked if m not in problems)
    state = item.config.stash[_STATE]
    if recording.outcome.unused and state.settings.fail_on_unused:
        problems.append(
            f"bench: {item.nodeid} never asked for {len(recording.outcome.unused)} exchange(s) recorded in "
            f"{recording.settings.cassette}: {', '.join(recording.outcome.unused)} (--bench-fail-on-unused); "
            "record the cassette again with --bench-record-mode=all"
        )
    if not problems:
        return
    text = "\n".join(problems)
    if report.passed:
        report.outcome = "failed"
        report.longrepr = text
    else:
        shown = str(report.longrepr)
        extra = "\n".join(p for p in problems if p not in shown)
        if extra:
            report.sections.append(("bench", extra))


class Reporter:
    """Collects every bench test's outcome from its report (pytest-xdist hands workers' reports to the controller
    with their properties) and prints the summary."""

    def __init__(self) -> None:
        self.outcomes: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for key, value in report.user_properties:
            if key == REPORT_KEY and isinstance(value, dict):
                self.outcomes.append(value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from bench.proxy.pytest_plugin.summary import summarize

        lines = summarize(self.outcomes)
        if lines:
            terminalreporter.section("bench")
            for line in lines:
                terminalreporter.write_line(line)


__all__ = ["BenchProxy"]
