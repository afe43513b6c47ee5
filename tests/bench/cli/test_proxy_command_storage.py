"""`bench proxy --cassettes s3://...` as a real process against moto's real S3 server on 127.0.0.1: the cassette is
written locally, uploaded and verified when the proxy stops, then replayed from the bucket; a failed upload keeps
the local file. The endpoint and credentials reach the process the way a user gives them: environment variables."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.core.cassette import CassetteReader
from tests.bench.cli.test_proxy_command import post
from tests.support.s3 import BUCKET
from tests.support.upstream import Upstream

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def _env(endpoint: str, cache: Path | None = None) -> dict[str, str]:
    """The S3 endpoint and credentials as a user gives them; bench's cache (its default spool) under `cache`."""
    return {
        **os.environ,
        **({"XDG_CACHE_HOME": str(cache)} if cache is not None else {}),
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


async def _run_proxy(
    endpoint: str, *args: str, cwd: Path = ROOT, cache: Path | None = None
) -> tuple[int, str, str, str]:
    """Start `bench proxy`, send one streamed exchange through it, stop it with SIGINT; (rc, url, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "proxy", "--port", "0", *args,
        cwd=cwd, env=_env(endpoint, cache), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    url = None
    lines: list[str] = []
    try:
        while url is None or not any("writing" in line for line in lines):
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line, "bench proxy exited before listening: " + (await proc.stderr.read()).decode()
            lines.append(line)
            if m := re.search(r"listening on (http://\S+)", line):
                url = m.group(1)
        async with aiohttp.ClientSession() as session:
            body = await post(session, url, x_words=5)
        assert body.endswith(b"data: [DONE]\n\n")
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, url, "".join(lines) + out.decode(), err.decode()


async def test_a_closed_cassette_is_uploaded_verified_and_replayed_from_s3(
    upstream: Upstream, s3: Any, s3_server: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    prefix = f"s3://{BUCKET}/proxy"
    rc, _, out, err = await _run_proxy(
        s3_server, "--upstream", upstream.url, "--cassettes", prefix, "--spool", str(spool)
    )
    assert rc == 0, err
    assert f"uploaded {prefix}/rec-" in out and "sha256 verified" in out
    assert not list(spool.glob("*/*.cassette"))  # removed once verified
    s3.invalidate_cache()
    (name,) = [n for n in s3.ls(f"{BUCKET}/proxy") if n.endswith(".cassette")]
    local = tmp_path / "copy.cassette"
    s3.get_file(name, str(local))
    (record,) = list(CassetteReader(local))
    assert record.outcome == "complete"
    assert "testing" not in out + err  # the credentials are never printed

    # Replay from the bucket with the upstream gone: the recording is fetched, then served.
    replay_spool = tmp_path / "replay"
    upstream_url = upstream.url
    await upstream.close()
    rc, _, out, err = await _run_proxy(
        s3_server, "--mode", "replay", "--pace", "instant", "--cassettes", prefix, "--spool", str(replay_spool)
    )
    assert rc == 0, err
    assert [p.name for p in replay_spool.glob("*/*.cassette")] == [Path(name).name]
    assert upstream_url not in out


async def test_a_failed_upload_keeps_the_local_cassette(upstream: Upstream, s3_server: str, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    rc, _, _, err = await _run_proxy(
        s3_server, "--upstream", upstream.url, "--cassettes", "s3://no-such-bucket/x", "--spool", str(spool)
    )
    assert rc == 1
    assert "upload refused" in err and "no such bucket" in err
    (kept,) = list(spool.glob("*/*.cassette"))
    assert len(list(CassetteReader(kept))) == 1


async def test_a_cassette_closed_but_not_uploaded_by_a_killed_proxy_is_uploaded_at_the_next_start(
    upstream: Upstream, s3: Any, s3_server: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    prefix = f"s3://{BUCKET}/leftover"
    # Fault injection: an S3 endpoint that accepts connections and never answers, so the upload after the close
    # hangs; the proxy is killed there, between closing its cassette and uploading it.
    with socket.socket() as black_hole:
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(16)
        endpoint = f"http://127.0.0.1:{black_hole.getsockname()[1]}"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench", "proxy", "--port", "0", "--upstream", upstream.url,
            "--cassettes", prefix, "--spool", str(spool),
            cwd=ROOT, env=_env(endpoint), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            url = None
            while True:
                line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
                assert line, "bench proxy exited early"
                if m := re.search(r"listening on (http://\S+)", line):
                    url = m.group(1)
                if "writing" in line:
                    break
            assert url is not None
            async with aiohttp.ClientSession() as session:
                await post(session, url, x_words=5)
            proc.send_signal(signal.SIGINT)
            while "stopped;" not in (line := (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()):
                assert line, "bench proxy exited before closing its cassette"
        finally:
            proc.kill()
            await proc.wait()
    (left,) = spool.glob("*/*.cassette")
    reader = CassetteReader(left)
    assert len(list(reader)) == 1 and reader.end is not None  # closed, whole
    left_bytes = left.read_bytes()
    s3.invalidate_cache()
    assert not s3.exists(f"{BUCKET}/leftover/{left.name}")

    rc, _, out, err = await _run_proxy(
        s3_server, "--upstream", upstream.url, "--cassettes", prefix, "--spool", str(spool)
    )
    assert rc == 0, err
    assert f"uploaded {prefix}/{left.name} left in the spool (size and sha256 verified)" in out
    assert not list(spool.glob("*/*.cassette"))
    s3.invalidate_cache()
    names = sorted(n.rsplit("/", 1)[-1] for n in s3.ls(f"{BUCKET}/leftover") if n.endswith(".cassette"))
    assert len(names) == 2 and left.name in names  # the leftover and the new run's cassette
    assert s3.cat_file(f"{BUCKET}/leftover/{left.name}") == left_bytes


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("spool_flag", [(), ("--spool", "cassettes")], ids=["default-spool", "spool-is-cassettes"])
async def test_recording_to_s3_never_uploads_or_removes_the_users_cassettes(
    upstream: Upstream, s3: Any, s3_server: str, tmp_path: Path, spool_flag: tuple[str, ...]
) -> None:
    """Run from a folder whose ./cassettes holds the user's own recordings, closed ones with bench's own naming
    among them (the shipped SmolLM2 one was uploaded and deleted so): they stay, byte for byte, and only the new
    run's cassette reaches the bucket."""
    work = tmp_path / "work"
    mine = work / "cassettes"
    mine.mkdir(parents=True)
    shutil.copy(SHIPPED, mine / "smollm2-135m-catalog.cassette")
    shutil.copy(SHIPPED, mine / "rec-20240101T000000-1.cassette")
    (mine / "notes.txt").write_text("not a cassette")
    before = _digests(mine)
    prefix = f"s3://{BUCKET}/mixed"
    rc, _, out, err = await _run_proxy(
        s3_server, "--upstream", upstream.url, "--cassettes", prefix, *spool_flag, cwd=work, cache=tmp_path / "cache"
    )
    assert rc == 0, err
    assert _digests(mine) == before
    assert str(mine) not in out and "cassettes/rec-2024" not in out
    s3.invalidate_cache()
    (stored,) = [n for n in s3.find(f"{BUCKET}/mixed")]
    assert stored.endswith(".cassette") and "20240101" not in stored and "smollm2" not in stored
    (record,) = list(CassetteReader(f"s3://{stored}"))
    assert record.outcome == "complete"
