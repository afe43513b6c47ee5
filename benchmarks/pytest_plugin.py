"""bench's pytest plugin against pytest-recording (vcrpy), side by side in one run.

1. A suite of N tests (default 200), each making one non-streamed chat completion with httpx (the client vcrpy
   intercepts), recorded once by each plugin from a local upstream, then replayed with the upstream stopped in
   interleaved rounds (bench, vcr, bench, vcr, ...). Prints the wall time of each replay run (pytest started in a
   subprocess, as a developer or CI runs it), the time pytest itself spent in the tests, their ratios, and each
   plugin's median time per test (setup + call + teardown).
2. A streamed suite: the same streamed request with httpx (sync and async) and with the openai SDK, recorded and
   replayed by each plugin. Prints what each test did on replay: passed with the recorded text, or how it failed.

    .venv/bin/pip install -e '.[dev,compare]'
    .venv/bin/python benchmarks/pytest_plugin.py [--tests 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.upstream import upstream_thread

# Collects each test's setup + call + teardown time into $DURATIONS (a conftest shared by every suite below).
CONFTEST = """
import json, os

_times = {}

def pytest_runtest_logreport(report):
    _times[report.nodeid] = _times.get(report.nodeid, 0.0) + report.duration

def pytest_sessionfinish(session):
    path = os.environ.get("DURATIONS")
    if path and _times and not hasattr(session.config, "workerinput"):
        with open(path, "w") as f:
            json.dump(_times, f)
"""

PLAIN = """
import os

import httpx
import pytest

pytestmark = pytest.mark.{marker}
CLIENT = httpx.Client()  # one per module, as an app keeps one (a client per call set up TLS each time: ~0.5 s here)


@pytest.mark.parametrize("n", range({n}))
def test_chat(n):
    body = {{"model": "test-model", "messages": [{{"role": "user", "content": f"question {{n}}"}}]}}
    r = CLIENT.post(os.environ.get("{url_env}", "") + "/chat/completions", json=body,
                   headers={{"Authorization": "Bearer sk-bench"}})
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"]
"""

STREAMED = """
import asyncio, json, os, time

import aiohttp
import httpx
import pytest
from openai import AsyncOpenAI, OpenAI

pytestmark = pytest.mark.{marker}
BODY = {{"model": "test-model", "stream": True, "messages": [{{"role": "user", "content": "tell a story"}}]}}
HEADERS = {{"Authorization": "Bearer sk-bench"}}


def base():  # read in the test: the plugin sets it for the test
    return os.environ.get("{url_env}", "")


def text(lines):
    out = []
    for line in lines:
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:])["choices"][0]["delta"].get("content") or "")
    return "".join(out)


def note(name, value):
    with open(os.environ["NOTES"], "a") as f:
        f.write(json.dumps([name, value]) + "\\n")


def test_httpx_sync_stream():
    with httpx.stream("POST", base() + "/chat/completions", json=BODY, headers=HEADERS, timeout=10) as r:
        note("httpx_sync_stream", text(r.iter_lines()))


def test_httpx_async_stream():
    async def main():
        async with httpx.AsyncClient(timeout=10) as client:
            async with client.stream("POST", base() + "/chat/completions", json=BODY, headers=HEADERS) as r:
                return text([line async for line in r.aiter_lines()])

    note("httpx_async_stream", asyncio.run(main()))


def test_openai_sdk_stream():
    client = OpenAI(base_url=base(), api_key="sk-bench", max_retries=0, timeout=10)
    stream = client.chat.completions.create(model="test-model", messages=BODY["messages"], stream=True)
    note("openai_sdk_stream", "".join(c.choices[0].delta.content or "" for c in stream if c.choices))


def test_openai_async_stream():
    async def main():
        client = AsyncOpenAI(base_url=base(), api_key="sk-bench", max_retries=0, timeout=10)
        stream = await client.chat.completions.create(model="test-model", messages=BODY["messages"], stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    note("openai_async_stream", asyncio.run(main()))


def test_aiohttp_stream():
    async def main():
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.post(base() + "/chat/completions", json=BODY, headers=HEADERS) as r:
                return text([line.decode().strip() async for line in r.content])

    note("aiohttp_stream", asyncio.run(main()))


def test_repeated_stream():
    # The same streamed question twice; the upstream answered each time differently.
    body = dict(BODY, model="test-count")
    texts = []
    for _ in range(2):
        with httpx.stream("POST", base() + "/chat/completions", json=body, headers=HEADERS, timeout=10) as r:
            texts.append(text(r.iter_lines()))
    note("repeated_stream", " | ".join(texts))


def test_broken_stream():
    # The server broke the stream off halfway: the app must keep what arrived and say what happened.
    body = dict(BODY, model="test-drop")
    lines = []
    try:
        with httpx.stream("POST", base() + "/chat/completions", json=body, headers=HEADERS, timeout=10) as r:
            for line in r.iter_lines():
                lines.append(line)
        outcome = "ended normally"
    except httpx.HTTPError as exc:
        outcome = type(exc).__name__
    note("broken_stream", text(lines) + " / " + outcome)


{slow_marker}
def test_slow_stream_shows_progress():
    # The model paused 1.5 s mid-answer; the app shows "still thinking" after a 1 s pause.
    body = dict(BODY, model="test-stall", x_stall_s=1.5)
    noticed = False
    last = time.monotonic()
    with httpx.stream("POST", base() + "/chat/completions", json=body, headers=HEADERS, timeout=10) as r:
        for line in r.iter_lines():
            now = time.monotonic()
            noticed = noticed or now - last > 1.0
            last = now
    note("slow_stream_progress", "noticed the pause" if noticed else "no pause seen")
"""

STREAM_TESTS = (
    "httpx_sync_stream",
    "httpx_async_stream",
    "openai_sdk_stream",
    "openai_async_stream",
    "aiohttp_stream",
    "repeated_stream",
    "broken_stream",
    "slow_stream_progress",
)
# Each plugin is run alone: the other one is disabled.
BENCH_ARGS = ["-p", "no:recording"]
VCR_ARGS = ["-p", "no:bench"]


def write_suite(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_suite.py").write_text(textwrap.dedent(source))
    return folder


def run_pytest(folder: Path, args: list[str], env: dict[str, str], timeout: float) -> tuple[float, str, int]:
    """Wall time, output and exit code of one pytest run in a subprocess."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out, code = out + f"\n(timed out after {timeout:.0f} s: the run hung)", -1
    return time.perf_counter() - start, out, code


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_ADDOPTS"))}
    env.update(extra)
    return env


def durations(path: Path) -> list[float]:
    times = json.loads(path.read_text())
    path.unlink()
    return [t * 1000 for t in times.values()]


def plain_suite(root: Path, n: int, rounds: int) -> None:
    bench_dir = write_suite(root / "plain_bench", PLAIN.format(marker="bench", url_env="OPENAI_BASE_URL", n=n))
    vcr_dir = write_suite(root / "plain_vcr", PLAIN.format(marker="vcr", url_env="UPSTREAM_URL", n=n))
    bare_dir = write_suite(root / "plain_bare", PLAIN.format(marker="usefixtures", url_env="UPSTREAM_URL", n=n))
    times = root / "durations.json"
    walls: dict[str, list[float]] = {"bench": [], "vcr": [], "bare": []}
    inner: dict[str, list[float]] = {"bench": [], "vcr": [], "bare": []}
    per_test: dict[str, list[float]] = {"bench": [], "vcr": [], "bare": []}
    with upstream_thread(ttft=0.0) as up:
        env = clean_env(DURATIONS=str(times), UPSTREAM_URL=up.base_url)
        _, out, code = run_pytest(
            bench_dir, [*BENCH_ARGS, "--bench-record-mode=once", f"--bench-upstream={up.base_url}"], env, 1800
        )
        assert code == 0, out
        _, out, code = run_pytest(vcr_dir, [*VCR_ARGS, "--record-mode=once"], env, 1800)
        assert code == 0, out
        assert len(up.requests) == 2 * n, f"expected {2 * n} recorded requests, the upstream saw {len(up.requests)}"
        runs = (
            # Both replays are offline: the upstream's request count below proves it.
            ("bench", bench_dir, [*BENCH_ARGS, "--bench-record-mode=none", "--bench-upstream=http://127.0.0.1:9/v1"]),
            ("vcr", vcr_dir, [*VCR_ARGS, "--record-mode=none", "--block-network"]),
            # No plugin: the same tests talk to the live upstream on loopback (answering at once).
            ("bare", bare_dir, ["-p", "no:bench", "-p", "no:recording"]),
        )
        for _ in range(rounds):
            for name, folder, args in runs:
                wall, out, code = run_pytest(folder, args, env, 1800)
                assert code == 0, f"{name} run failed:\n{out[-3000:]}"
                walls[name].append(wall)
                tests = durations(times)
                inner[name].append(sum(tests) / 1000)
                per_test[name].extend(tests)
        assert len(up.requests) == 2 * n + rounds * n, "a replay reached the upstream"
    med = {k: statistics.median(v) for k, v in walls.items()}
    med_inner = {k: statistics.median(v) for k, v in inner.items()}
    med_test = {k: statistics.median(v) for k, v in per_test.items()}
    print(f"\n1. {n} non-streamed tests (httpx), {rounds} interleaved rounds (medians); bench and vcr replay offline,")
    print("   bare is the same tests with no plugin against the live upstream on loopback")
    print(
        f"   wall time of the pytest run:  bench {med['bench']:.2f} s   vcr {med['vcr']:.2f} s   "
        f"bare {med['bare']:.2f} s   vcr/bench {med['vcr'] / med['bench']:.2f}x"
    )
    print(
        f"   time in the tests:            bench {med_inner['bench']:.2f} s   vcr {med_inner['vcr']:.2f} s   "
        f"bare {med_inner['bare']:.2f} s   vcr/bench {med_inner['vcr'] / med_inner['bench']:.2f}x"
    )
    print(
        f"   per test (setup+call+teardown): bench {med_test['bench']:.2f} ms   vcr {med_test['vcr']:.2f} ms   "
        f"bare {med_test['bare']:.2f} ms"
    )
    print(
        f"   per-test overhead in none mode (bench - bare, medians): {med_test['bench'] - med_test['bare']:.2f} ms; "
        f"vcr - bare: {med_test['vcr'] - med_test['bare']:.2f} ms"
    )


def streamed_suite(root: Path) -> None:
    notes = root / "notes.jsonl"
    bench_dir = write_suite(
        root / "stream_bench",
        STREAMED.format(marker="bench", url_env="OPENAI_BASE_URL", slow_marker='@pytest.mark.bench(pace="realtime")'),
    )
    vcr_dir = write_suite(root / "stream_vcr", STREAMED.format(marker="vcr", url_env="UPSTREAM_URL", slow_marker=""))
    results: dict[str, dict[str, str]] = {}
    with upstream_thread() as up:
        env = clean_env(NOTES=str(notes), UPSTREAM_URL=up.base_url)
        recorded: dict[str, dict[str, str]] = {}
        for name, folder, args in (
            ("bench", bench_dir, [*BENCH_ARGS, "--bench-record-mode=once", f"--bench-upstream={up.base_url}"]),
            ("vcr", vcr_dir, [*VCR_ARGS, "--record-mode=once"]),
        ):
            _, out, code = run_pytest(folder, args, env, 120)
            recorded[name] = read_notes(notes)
            assert code == 0, f"{name} could not record:\n{out[-3000:]}"
        seen_live = len(up.requests)
    env = clean_env(NOTES=str(notes), UPSTREAM_URL=up.base_url)  # stopped: its port refuses connections
    for name, folder, args in (
        ("bench", bench_dir, [*BENCH_ARGS, "--bench-upstream=http://127.0.0.1:9/v1"]),
        ("vcr", vcr_dir, [*VCR_ARGS, "--record-mode=none"]),
    ):
        _, out, code = run_pytest(folder, [*args, "-rA", "--tb=line"], env, 120)
        replayed = read_notes(notes)
        results[name] = {}
        for test in STREAM_TESTS:
            if test in replayed:
                same = replayed[test] == recorded[name].get(test) and replayed[test] != ""
                got = replayed[test][-60:]
                results[name][test] = f"as recorded: ...{got!r}" if same else f"NOT as recorded: ...{got!r}"
            else:
                results[name][test] = "failed: " + failure_line(out, test)
    print(f"\n2. streamed tests, recorded from a live upstream ({seen_live} requests), replayed with it stopped")
    for name, tests in results.items():
        for test, what in tests.items():
            print(f"   {name:5} {test:21} {what}")


def read_notes(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text().splitlines():
        name, value = json.loads(line)
        found[name] = value
    path.unlink()
    return found


def failure_line(out: str, test: str) -> str:
    """The line pytest printed for the test's failure (--tb=line / -rA), or the run's last line."""
    if "timed out after" in out:
        return out.strip().splitlines()[-1]
    for line in out.splitlines():
        if line.startswith(("FAILED", "ERROR")) and test in line:
            return line.split(" - ", 1)[-1][:160]
    return out.strip().splitlines()[-1][:160] if out.strip() else "no output"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams-only", action="store_true", help="only part 2")
    args = parser.parse_args()
    try:
        import pytest_recording  # noqa: F401
        import vcr  # noqa: F401
    except ImportError:
        sys.exit("needs pytest-recording and vcrpy: pip install -e '.[dev,compare]'")
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as tmp:
        root = Path(tmp)
        if not args.streams_only:
            plain_suite(root, args.tests, args.rounds)
        streamed_suite(root)


if __name__ == "__main__":
    main()
