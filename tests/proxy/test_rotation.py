"""`bench proxy --rotate-size/--rotate-every` as a real process against a real upstream on 127.0.0.1: cassettes are
closed and the next opened while streams are in flight, no exchange is split or lost, and with an s3:// prefix each
closed cassette is uploaded (moto's real S3 server)."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.cli import main
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import Exchange
from bench.proxy.rotation import parse_duration, parse_size
from tests.bench.cli.test_proxy_command import post
from tests.support.upstream import Upstream

ROOT = Path(__file__).resolve().parents[2]


class Proxy:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.url = ""
        self.lines: list[str] = []

    async def line(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The next stdout line matching `pattern` (lines before it are kept in `lines`)."""
        assert self.proc.stdout is not None
        while True:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            assert raw, "bench proxy exited: " + "".join(self.lines)
            text = raw.decode()
            self.lines.append(text)
            if m := re.search(pattern, text):
                return m

    async def stop(self, sig: int = signal.SIGINT) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        out, err = await asyncio.wait_for(self.proc.communicate(), 60)
        return self.proc.returncode or 0, "".join(self.lines) + out.decode(), err.decode()


@asynccontextmanager
async def rotating_proxy(
    *args: str, env: dict[str, str] | None = None, ready: str = r"writing "
) -> AsyncIterator[Proxy]:
    """`bench proxy --port 0 ARGS` once it listens and has printed a line matching `ready`; killed if still up."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "proxy", "--port", "0", *args,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    proxy = Proxy(proc)
    try:
        proxy.url = (await proxy.line(r"listening on (http://\S+)")).group(1)
        await proxy.line(ready)
        yield proxy
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def records_of(folder: Path) -> list[Exchange]:
    """Every record of every cassette in the folder, each cassette checked whole (closed cleanly, not cut)."""
    out = []
    for path in sorted(folder.glob("*.cassette")):
        reader = CassetteReader(path)
        out.extend(reader)
        assert not reader.truncated and reader.end is not None, path
    return out


async def test_size_rotation_keeps_every_exchange_whole_across_cassettes(upstream: Upstream, tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    async with (
        rotating_proxy("--upstream", upstream.url, "--cassettes", str(folder), "--rotate-size", "1") as proxy,
        aiohttp.ClientSession() as session,
    ):
        # A stream in flight for the whole test (its upstream holds the end of its body until released): it began
        # in one cassette's time and ends in another's.
        slow = asyncio.create_task(post(session, proxy.url, x_ttft_ms=1, x_words=6, x_hold="slow"))
        first = await post(session, proxy.url, x_words=3)
        closed = (await proxy.line(r"closed (\S+)")).group(1)
        second = await post(session, proxy.url, x_words=4)
        await proxy.line(r"closed ")
        assert not slow.done(), "the slow stream must span the rotations"
        upstream.release("slow")
        long = await asyncio.wait_for(slow, 60)
        rc, out, err = await proxy.stop()
    assert rc == 0, err
    assert (folder / Path(closed).name).exists()
    files = sorted(folder.glob("*.cassette"))
    assert len(files) >= 3, out
    bodies = sorted(b"".join(r.response.chunks) for r in records_of(folder))
    assert bodies == sorted([first, second, long]), "each exchange is recorded once, whole"
    assert all(body.endswith(b"data: [DONE]\n\n") for body in bodies)


async def test_time_rotation_and_the_proxy_stop_close_every_cassette(upstream: Upstream, tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    sent = []
    async with (
        rotating_proxy("--upstream", upstream.url, "--cassettes", str(folder), "--rotate-every", "0.5s") as proxy,
        aiohttp.ClientSession() as session,
    ):
        for words in (2, 3, 4):
            sent.append(await post(session, proxy.url, x_words=words))
            await proxy.line(r"closed ")
        sent.append(await post(session, proxy.url, x_words=5))  # in the cassette the stop closes
        rc, _, err = await proxy.stop()
    assert rc == 0, err
    # One cassette per exchange; a rotation due just before the stop may add an empty one, closed cleanly too.
    assert sum(1 for p in folder.glob("*.cassette") if records_of_one(p)) == 4
    assert sorted(b"".join(r.response.chunks) for r in records_of(folder)) == sorted(sent)


async def test_each_rotated_cassette_is_uploaded_when_closed(
    upstream: Upstream, s3: Any, s3_server: str, tmp_path: Path
) -> None:
    pytest.importorskip("s3fs")
    from tests.bench.cli.test_proxy_command_storage import _env
    from tests.support.s3 import BUCKET

    spool = tmp_path / "spool"
    prefix = f"s3://{BUCKET}/rotated"
    async with (
        rotating_proxy(
            "--upstream", upstream.url, "--cassettes", prefix, "--spool", str(spool), "--rotate-size", "1",
            env=_env(s3_server),
        ) as proxy,
        aiohttp.ClientSession() as session,
    ):  # fmt: skip
        await post(session, proxy.url, x_words=3)
        uploaded = (await proxy.line(r"uploaded (s3://\S+) \(size and sha256 verified\)")).group(1)
        await post(session, proxy.url, x_words=4)
        rc, out, err = await proxy.stop()
    assert rc == 0, err
    assert uploaded.startswith(prefix + "/") and "testing" not in out + err
    assert not list(spool.glob("*/*.cassette")), "every local copy is removed once verified"
    s3.invalidate_cache()
    names = sorted(n for n in s3.ls(f"{BUCKET}/rotated") if n.endswith(".cassette"))
    held = []
    for name in names:
        local = tmp_path / Path(name).name
        s3.get_file(name, str(local))
        held.append(len(records_of_one(local)))
    # One exchange per cassette. The rotation watcher (every CHECK_S) may also have rotated after the second exchange
    # and before the stop took effect: that last cassette, closed cleanly, holds none.
    assert held[:2] == [1, 1] and held[2:] in ([], [0]), held


def records_of_one(path: Path) -> list[Exchange]:
    reader = CassetteReader(path)
    records = list(reader)
    assert not reader.truncated and reader.end is not None
    return records


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--rotate-size", "lots", "give a size such as 500MB"),
        ("--rotate-size", "0", "give a size such as 500MB"),
        ("--rotate-every", "soon", "give a duration such as 30s"),
    ],
)
def test_bad_rotation_flags_are_one_line_errors(
    flag: str, value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--cassettes", str(tmp_path), flag, value]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_sizes_and_durations() -> None:
    assert parse_size("500MB") == 500 * 10**6 and parse_size("1GiB") == 2**30 and parse_size("2048") == 2048
    assert parse_duration("10m") == 600 and parse_duration("1.5h") == 5400 and parse_duration("90") == 90
