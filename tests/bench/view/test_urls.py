"""`bench view` over cassettes at object-storage URLs: a real S3 API (moto's server on 127.0.0.1, s3fs as client)
and fsspec's memory:// store; the errors a user meets there are one line each."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.core import storage
from bench.view.detail import detail, raw_bytes
from bench.view.index import Index, open_index
from tests.support.s3 import BUCKET

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")


def _check_same_view(remote: Index, local: Index, url: str) -> None:
    assert remote.rows == local.rows
    row = next(r for r in local.rows if r.passed is False)
    got, want = detail(remote, row.n), detail(local, row.n)
    assert got == want and got.exchanges and not got.missing
    exchange = got.exchanges[-1].id
    assert raw_bytes(remote, row.n, exchange) == raw_bytes(local, row.n, exchange)
    (seek,) = remote._seek.values()
    assert str(seek.path) == url and seek.scans == 0 and seek.seeks >= 1  # ranged reads, not whole scans


def test_view_reads_cassettes_at_an_s3_prefix(s3: Any, smollm2_dir: Path, tmp_path: Path) -> None:
    cassette = next(smollm2_dir.glob("*.cassette"))
    local = tmp_path / "spool" / "run-1.cassette"
    local.parent.mkdir()
    shutil.copy(cassette, local)
    url = storage.upload(local, f"s3://{BUCKET}/runs")
    here = tmp_path / "here"
    here.mkdir()
    shutil.copy(cassette, here / "run-1.cassette")
    _check_same_view(open_index([f"s3://{BUCKET}/runs"]), open_index([here]), url)


def test_view_reads_a_memory_url(smollm2_dir: Path, tmp_path: Path) -> None:
    cassette = next(smollm2_dir.glob("*.cassette"))
    url = "memory://bench-view-test/run-1.cassette"
    storage.filesystem(url).pipe_file(url, cassette.read_bytes())
    here = tmp_path / "run-1.cassette"
    shutil.copy(cassette, here)
    _check_same_view(open_index([url]), open_index([here]), url)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("s3://no-such-bucket/runs", "s3://no-such-bucket/runs: no such bucket"),
        ("nope://bucket/runs", "unknown storage protocol 'nope'"),
    ],
)
def test_storage_errors_are_one_line(s3: Any, capsys: pytest.CaptureFixture[str], url: str, said: str) -> None:
    assert main(["view", url, "--no-open"]) == 1
    err = capsys.readouterr().err.strip()
    assert said in err and err.startswith("bench: error: ") and "\n" not in err


def test_a_missing_backend_names_what_to_install(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here")
    assert main(["view", "gs://bucket/runs", "--no-open"]) == 1
    err = capsys.readouterr().err.strip()
    assert "gs:// needs the gcsfs package: pip install gcsfs" in err and "\n" not in err


def test_missing_credentials_are_one_line(
    s3: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import s3fs

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookup off this machine
    s3fs.S3FileSystem.clear_instance_cache()
    assert main(["view", f"s3://{BUCKET}/runs", "--no-open"]) == 1
    err = capsys.readouterr().err.strip()
    assert "no credentials for s3://" in err and "\n" not in err
