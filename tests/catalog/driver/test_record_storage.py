"""`bench record --out s3://...` as a real process against the simulator and moto's real S3 server on 127.0.0.1:
the cassette is recorded locally, uploaded and verified, then removed; a refused upload keeps it (one line)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader
from bench.scorer.checked_catalog import load_catalog
from tests.support.s3 import BUCKET

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

ROOT = Path(__file__).resolve().parents[3]


async def record(endpoint: str, url: str, *args: str) -> tuple[int, str, str]:
    env = {
        **os.environ,
        "BENCH_API_KEY": "sk-record-storage-test",
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "record", "--upstream", url, "--model", "oracle",
        "--tests", "tools.capital_no_tool", "--quiet", *args,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_record_uploads_the_closed_cassette(s3: Any, s3_server: str, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    prefix = f"s3://{BUCKET}/recorded"
    async with await start_sim(catalog=load_catalog(None), ttft_ms=0, tokens_per_second=2000) as sim:
        rc, out, err = await record(s3_server, sim.url, "--out", prefix, "--spool", str(spool))
    assert rc == 0, err
    assert f"uploaded {prefix}/" in out and "sha256 verified" in out and f"bench rescore {prefix}" in out
    assert not list(spool.glob("*/*.cassette")), "removed once verified"
    s3.invalidate_cache()
    (name,) = [n for n in s3.ls(f"{BUCKET}/recorded") if n.endswith(".cassette")]
    local = tmp_path / "copy.cassette"
    s3.get_file(name, str(local))
    reader = CassetteReader(local)
    records = list(reader)
    assert records and reader.end is not None and reader.header.run.id
    assert "sk-record-storage-test" not in out + err and "testing" not in out + err


async def test_a_refused_upload_keeps_the_local_cassette(s3: Any, s3_server: str, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    async with await start_sim(catalog=load_catalog(None), ttft_ms=0, tokens_per_second=2000) as sim:
        rc, _, err = await record(s3_server, sim.url, "--out", "s3://no-such-bucket-9/x", "--spool", str(spool))
    assert rc == 1
    assert "upload refused" in err and "kept" in err and len(err.strip().splitlines()) == 1
    (kept,) = list(spool.glob("*/*.cassette"))
    assert list(CassetteReader(kept))
