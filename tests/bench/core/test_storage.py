"""Cassettes on object storage against a real S3 API: moto's server on 127.0.0.1, s3fs as the client, the endpoint
given through fsspec's config as a user would (FSSPEC_S3_ENDPOINT_URL); credentials from the AWS environment."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bench.cli import main
from bench.core import spool, storage
from bench.core.cassette.reader import find_locations
from bench.core.errors import BenchError
from bench.scorer.checked_catalog import load_catalog
from tests.support.rescored import rescored as rescore
from tests.support.s3 import BUCKET

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

SHIPPED = Path(__file__).resolve().parents[3] / "cassettes" / "smollm2-135m-catalog.cassette"


def _local_copy(tmp_path: Path, name: str = "run-1.cassette") -> Path:
    local = tmp_path / "spool" / name
    local.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SHIPPED, local)
    return local


def test_upload_verifies_then_removes_the_local_copy(s3: Any, tmp_path: Path) -> None:
    local = _local_copy(tmp_path)
    url = storage.upload(local, f"s3://{BUCKET}/runs/")
    assert url == f"s3://{BUCKET}/runs/run-1.cassette"
    assert not local.exists()
    assert s3.cat_file(url) == SHIPPED.read_bytes()


def test_rescore_and_ls_read_s3_urls(s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    storage.upload(_local_copy(tmp_path), f"s3://{BUCKET}/runs")
    catalog = load_catalog(None)
    _, local = rescore([SHIPPED], catalog=catalog, base=SHIPPED.parent)
    _, remote = rescore([f"s3://{BUCKET}/runs"], catalog=catalog)
    assert len(remote) == len(local) > 100
    for a, b in zip(local, remote, strict=True):
        assert b.cassette == f"s3://{BUCKET}/runs/run-1.cassette"
        assert msgspec.structs.replace(a, cassette="") == msgspec.structs.replace(b, cassette="")

    assert main(["cassette", "ls", f"s3://{BUCKET}/runs"]) == 0
    out = capsys.readouterr().out
    assert "run-1.cassette" in out and "212" in out
    assert main(["cassette", "show", f"s3://{BUCKET}/runs/run-1.cassette"]) == 0
    assert "run-1.cassette" in capsys.readouterr().out

    scores = tmp_path / "scores.jsonl"
    assert main(["rescore", f"s3://{BUCKET}/runs", "--out", str(scores)]) == 0
    assert scores.read_bytes().count(b'"kind":"result"') == len(local)


def test_an_upload_to_a_missing_bucket_keeps_the_local_file_and_is_not_retried(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = _local_copy(tmp_path)
    pauses: list[float] = []
    monkeypatch.setattr(storage.time, "sleep", pauses.append)
    with pytest.raises(BenchError) as err:
        storage.upload(local, "s3://no-such-bucket/runs")
    message = str(err.value)
    assert message.startswith("upload refused (") and "no such bucket" in message
    assert str(local) in message and "\n" not in message
    assert local.read_bytes() == SHIPPED.read_bytes()
    assert pauses == []  # it would fail the same way after any pause


def test_an_upload_that_fails_for_a_while_is_retried_after_pauses_then_verified(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: the service drops the first two uploads (as a connection reset would), then takes the third.
    fs = storage.filesystem(f"s3://{BUCKET}/runs/")  # fsspec hands the same instance to `upload`
    put = fs.put_file
    failures = [ConnectionResetError("reset by peer"), ConnectionResetError("reset by peer")]

    def flaky(*args: Any, **kw: Any) -> Any:
        if failures:
            raise failures.pop()
        return put(*args, **kw)

    pauses: list[float] = []
    monkeypatch.setattr(fs, "put_file", flaky)
    monkeypatch.setattr(storage.time, "sleep", pauses.append)
    local = _local_copy(tmp_path)
    url = storage.upload(local, f"s3://{BUCKET}/runs/")
    assert pauses == [1.0, 2.0] and not local.exists()
    assert s3.cat_file(url) == SHIPPED.read_bytes()

    failures.extend([ConnectionResetError("reset by peer")] * 3)
    local = _local_copy(tmp_path, "run-2.cassette")
    with pytest.raises(BenchError) as err:
        storage.upload(local, f"s3://{BUCKET}/runs/")
    assert str(err.value).startswith("upload failed after 3 tries (") and local.exists()


def test_a_missing_bucket_is_one_line(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cassette", "ls", "s3://no-such-bucket/runs"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench: error: s3://no-such-bucket/runs: no such bucket")
    assert "\n" not in err


def test_rescore_from_a_url_needs_out(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rescore", f"s3://{BUCKET}/runs"]) == 1
    assert "give --out FILE" in capsys.readouterr().err


def test_missing_credentials_are_one_line(
    s3: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import s3fs

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3fs.S3FileSystem.clear_instance_cache()
    assert main(["cassette", "ls", f"s3://{BUCKET}/runs"]) == 1
    err = capsys.readouterr().err.strip()
    assert "no credentials" in err and "\n" not in err


def test_a_missing_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec  # noqa: F401 - loads fsspec.registry

    monkeypatch.setitem(sys.modules, "s3fs", None)
    # As on an install without s3fs: fsspec has not loaded its class yet.
    monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, "s3", raising=False)
    with pytest.raises(BenchError, match=r"needs the s3fs package: pip install 'llm-gateway-bench\[s3\]'"):
        storage.filesystem("s3://bucket/x")


def test_memory_urls_round_trip(tmp_path: Path) -> None:
    url = storage.upload(_local_copy(tmp_path, "m.cassette"), "memory://bench-test/runs")
    assert find_locations(["memory://bench-test/runs"]) == [url]
    _, results = rescore([url], catalog=load_catalog(None))
    assert results and all(r.cassette == url for r in results)


def test_leftovers_in_the_spool_are_uploaded_checked_or_left(s3: Any, tmp_path: Path) -> None:
    prefix = f"s3://{BUCKET}/left/"
    (tmp_path / "spool").mkdir()
    (tmp_path / "spool" / spool.MARKER).write_text(prefix.rstrip("/"))  # as spool_folder marks bench's own
    closed = _local_copy(tmp_path, "a-closed.cassette")
    done = _local_copy(tmp_path, "b-done.cassette")  # uploaded whole before the process died: only the removal lacked
    s3.put_file(str(done), f"{BUCKET}/left/b-done.cassette")
    other = _local_copy(tmp_path, "c-other.cassette")
    s3.pipe_file(f"{BUCKET}/left/c-other.cassette", b"someone else's bytes")
    cut = tmp_path / "spool" / "d-cut.cassette"  # a crash mid-write: no end record
    cut.write_bytes(SHIPPED.read_bytes()[: SHIPPED.stat().st_size // 2])
    lines = spool.upload_leftovers(tmp_path / "spool", prefix)
    assert lines[0] == f"uploaded {prefix}a-closed.cassette left in the spool (size and sha256 verified)"
    assert "already uploaded whole" in lines[1] and "not overwritten" in lines[2] and str(cut) in lines[3]
    assert not closed.exists() and not done.exists() and other.exists() and cut.exists()
    s3.invalidate_cache()
    assert s3.cat_file(f"{prefix}a-closed.cassette") == SHIPPED.read_bytes()
    assert s3.cat_file(f"{prefix}c-other.cassette") == b"someone else's bytes"
    assert not s3.exists(f"{prefix}d-cut.cassette")
    assert spool.upload_leftovers(tmp_path / "nothing", prefix) == []


def test_leftovers_come_only_from_the_spool_bench_marked_for_that_url(s3: Any, tmp_path: Path) -> None:
    """A user's folder of closed cassettes (unmarked), or bench's spool of another prefix, gives no leftovers:
    nothing there is uploaded or removed."""
    prefix = f"s3://{BUCKET}/only/"
    users = _local_copy(tmp_path, "rec-20240101T000000-1.cassette")
    assert spool.upload_leftovers(users.parent, prefix) == []
    other = spool.spool_folder(f"s3://{BUCKET}/elsewhere", tmp_path / "root")
    shutil.copy(SHIPPED, other / "rec-1.cassette")
    assert spool.upload_leftovers(other, prefix) == []
    assert users.exists() and (other / "rec-1.cassette").exists()
    s3.invalidate_cache()
    assert not s3.exists(f"{BUCKET}/only")
    mine = spool.spool_folder(prefix, tmp_path / "root")
    assert mine != other and mine.parent == tmp_path / "root" and spool.spool_folder(prefix + "/", mine.parent) == mine


def test_a_folder_named_like_a_spool_but_not_marked_by_bench_is_refused(tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/x"
    taken = spool.spool_folder(url, tmp_path)
    (taken / spool.MARKER).unlink()
    (taken / "mine.txt").write_text("someone's")
    with pytest.raises(BenchError, match=r"is not bench's spool for s3://bench-runs/x; move it away or give another"):
        spool.spool_folder(url, tmp_path)
    assert (taken / "mine.txt").read_text() == "someone's"


def test_the_default_spool_is_in_benchs_cache_not_the_working_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    folder = spool.spool_folder("s3://b/p")
    assert folder.parent == tmp_path / "cache" / "bench" / "spool"
    assert not (tmp_path / "cassettes").exists()


def _small_cassette(path: Path, n: int, seed: int) -> None:
    from bench.core.cassette import CassetteWriter
    from bench.scorer.synth import exchange_record

    with CassetteWriter(path) as w:
        for i in range(n):
            chunks = [b'data: {"choices":[{"delta":{"content":"w%d"}}]}\n\n' % (seed * 100 + k) for k in range(5)]
            w.put(exchange_record([*chunks, b"data: [DONE]\n\n"], id=f"x{seed}-{i}", tags={"test": f"t.{i % 3}"}))


def test_a_rescore_from_a_url_fetches_several_cassettes_at_once(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from bench.scorer import units

    prefix = f"s3://{BUCKET}/ahead"
    for k in range(6):
        local = tmp_path / f"c{k}.cassette"
        _small_cassette(local, 4, k)
        s3.put_file(str(local), f"{BUCKET}/ahead/{local.name}")
    s3.invalidate_cache()
    # Two fetches must be under way at the same moment for either to go on: reads one at a time would break the
    # barrier (after its timeout), and the cassettes would then be read without the prefetch.
    together = threading.Barrier(2, timeout=60)
    overlapped = []
    admitted = []
    lock = threading.Lock()  # the first two fetches, exactly, meet at the barrier, however the threads interleave
    whole = storage._whole

    def fetch(url: str) -> bytes:
        with lock:
            first_two = len(admitted) < 2
            admitted.append(url)
        if first_two:
            together.wait()
            overlapped.append(url)
        return whole(url)

    monkeypatch.setattr(storage, "_whole", fetch)
    catalog = load_catalog(None)
    fetched_ahead = rescore([prefix], catalog=catalog)
    assert len(overlapped) == 2
    monkeypatch.setattr(units, "PREFETCH", 0)
    one_at_a_time = rescore([prefix], catalog=catalog)
    assert _lines(*fetched_ahead) == _lines(*one_at_a_time)
    assert len(fetched_ahead[1]) == 6 * 3  # three tests per cassette


def _lines(meta: Any, results: Any) -> list[bytes]:
    from bench.scorer.scores_io import dumps

    return [dumps(meta), *map(dumps, results)]
