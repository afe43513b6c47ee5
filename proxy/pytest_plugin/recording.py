"""One test's recording or replay: which proxy it gets, and what it missed, left unused or recorded.

| record mode    | cassette exists               | no cassette                          |
|----------------|-------------------------------|--------------------------------------|
| `none`         | replay only                   | every request misses                 |
| `once`         | replay only                   | record                               |
| `new_episodes` | replay what matches, record the rest (proxy `auto`)  | record        |
| `all`          | record                        | record                               |

Replay only: nothing is forwarded, the network is blocked, a request not recorded (or asked more often than it was
recorded) is a miss that fails the test, and recorded exchanges nobody asked for are reported as unused.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from bench.core.cassette import CassetteReader
from bench.core.cassette.records import RunMeta
from bench.core.errors import BenchError
from bench.proxy.pytest_plugin.cassettes import (
    Stale,
    commit,
    depends_on_digests,
    error_answers,
    partial_path,
    staleness,
)
from bench.proxy.pytest_plugin.loop import ProxyLoop, Route
from bench.proxy.pytest_plugin.settings import Settings, TestSettings
from bench.proxy.server import RunningProxy, start_proxy

# A test's proxy is closed when the test ends: a request still running by then (a stream the test left open) gets
# this long to finish before it is cut off.
GRACE_S = 2.0
REPLAY, RECORD, AUTO, MISSING = "replay", "record", "auto", "missing"


class Outcome(msgspec.Struct):
    """What bench did for one test: reported in the terminal summary (carried by the test's report, also from
    pytest-xdist workers)."""

    test: str
    cassette: str
    plan: str  # replay, record, auto (new_episodes with a cassette), missing (nothing to replay)
    pace: str
    replayed: int = 0
    recorded: int = 0  # new exchanges committed to the cassette
    misses: list[str] = msgspec.field(default_factory=list)
    unused: list[str] = msgspec.field(default_factory=list)
    blocked: list[str] = msgspec.field(default_factory=list)
    stale: str | None = None


def plan_for(mode: str, exists: bool) -> str:
    if mode == "all":
        return RECORD
    if exists:
        return AUTO if mode == "new_episodes" else REPLAY
    return MISSING if mode == "none" else RECORD


class TestRecording:
    def __init__(
        self, *, test: str, settings: TestSettings, run: Settings, root: Path, session: str, worker: str
    ) -> None:
        self.test = test
        self.settings = settings
        self.run = run
        self.session = session
        cassette = settings.cassette
        self.plan = plan_for(settings.record_mode, cassette.exists())
        self.partial = partial_path(cassette, worker)
        self.proxy: RunningProxy | None = None
        self.route: Route | None = None
        self.depends_on = depends_on_digests(settings.depends_on, root)
        self.outcome = Outcome(test=test, cassette=str(cassette), plan=self.plan, pace=settings.pace)
        self.stale: Stale | None = None
        if self.plan in (REPLAY, AUTO):
            reader = CassetteReader(cassette)
            header = reader.header  # a foreign or damaged file fails here, in one line
            if self.plan == REPLAY and settings.record_mode == "once" and header.run.session == session:
                # Another test of this run wrote it (two tests naming one cassette): for this test there was no
                # cassette yet, so it records, and its exchanges are joined to the other's when committed.
                self.plan = self.outcome.plan = RECORD
            else:
                self.stale = staleness(cassette, header, max_age_s=run.max_age_s, depends_on=self.depends_on)
                self.outcome.stale = None if self.stale is None else self.stale.why
                if self.plan == REPLAY and settings.record_mode == "once" and not settings.allow_errors:
                    errors = error_answers(list(reader))
                    if errors:
                        raise BenchError(self.holds_errors(errors))

    def holds_errors(self, errors: list[str]) -> str:
        """The line for a recording whose answer is the upstream's error: replaying it tests the error, every run."""
        return (
            f"its cassette {self.settings.cassette} holds an error answer from the upstream ({'; '.join(errors[:3])}), "
            "and `once` replays it every run; fix the cause (the key, the model name, the server) and record again "
            "with --bench-record-mode=all, or mark the test bench(allow_errors=True) if the error is what it tests"
        )

    @property
    def replay_only(self) -> bool:
        return self.plan in (REPLAY, MISSING)

    def fix(self) -> str:
        """How to record what this test is missing."""
        if self.plan == MISSING:
            return "record it with --bench-record-mode=once (it forwards to bench_upstream)"
        return (
            "record the missing requests with --bench-record-mode=new_episodes, or everything again with "
            "--bench-record-mode=all"
        )

    async def start(self, loop: ProxyLoop) -> None:
        s = self.settings
        if self.plan == MISSING:
            message = (
                f"bench: no cassette {s.cassette} for {self.test}, and record mode {s.record_mode} only replays; "
                f"{self.fix()}"
            )
            self.route = Route(None, missing=message)
        else:
            run = RunMeta(source="pytest", test=self.test, session=self.session)
            if self.depends_on:
                run.depends_on = self.depends_on
            self.proxy = await start_proxy(
                upstream=None if self.plan == REPLAY else self.run.upstream,
                cassettes=s.cassette if self.plan != RECORD else s.cassette.parent,
                cassette=None if self.plan == REPLAY else self.partial,
                mode=self.plan,
                pace=s.pace,
                run=run,
                replay_log=False,
                repeat=False,
                serve=False,
                miss_hint=self.fix(),
            )
            self.route = Route(self.proxy)
        loop.route = self.route

    def inspect(self) -> list[str]:
        """At the end of the test body: what went wrong so far (misses), and what it left unused."""
        o = self.outcome
        if self.route is not None and self.route.missing is not None:
            o.misses = [self.route.missing] if self.route.missing_hits else []
        elif self.proxy is not None:
            proxy = self.proxy
            o.misses = [f"bench: {self.test}: {m}" for m in proxy.misses]
            o.replayed = proxy.stats.replayed
            if self.plan == REPLAY:
                o.unused = [f"{r.id} ({r.request.method} {r.request.path})" for r in proxy.unused()]
        return o.misses

    async def stop(self, loop: ProxyLoop) -> None:
        if loop.route is self.route:
            loop.route = None
        if self.proxy is not None:
            await self.proxy.close(grace=GRACE_S)

    def discard(self) -> None:
        """Drop the new recording unseen (a run interrupted during this test: it may be cut short)."""
        self.partial.unlink(missing_ok=True)

    def commit(self) -> list[str]:
        """Move the new recording into the cassette (after `stop`); returns what must fail the test: bench's own
        error answers (never saved: no upstream answered), an upstream error saved in `once` mode."""
        if self.plan not in (RECORD, AUTO) or not self.partial.exists():
            return []
        recorded = list(CassetteReader(self.partial)) if self.settings.record_mode == "once" else []
        done = commit(self.partial, self.settings.cassette, join=self.plan == AUTO, session=self.session)
        self.outcome.recorded = done.recorded
        problems = []
        if done.own_errors:
            problems.append(
                f"the upstream {self.run.upstream} did not answer {done.own_errors} request(s) (bench's own 502/504, "
                "not saved as a recording); start it (or fix bench_upstream / OPENAI_BASE_URL) and run again"
            )
        errors = [] if self.settings.allow_errors else error_answers(recorded)
        if errors:
            problems.append(self.holds_errors(errors))
        return problems
