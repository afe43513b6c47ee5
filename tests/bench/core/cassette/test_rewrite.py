from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from bench.cli import main
from bench.core.cassette import CassetteReader
from tests.bench.core.cassette.v1 import FIXTURE, v1_header, write_v1
from tests.support.records import exchange


def test_upgrade_rewrites_v1_as_v2_with_every_record_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.cassette"
    shutil.copy(FIXTURE, path)
    before = CassetteReader(path)
    records = list(before)
    assert before.version == 1
    assert main(["cassette", "upgrade", str(tmp_path)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{path}: upgraded v1 -> v2, 6 exchange(s) verified")
    after = CassetteReader(path)
    assert after.version == 2 and list(after) == records and after.end == before.end and after.problem is None
    assert msgspec.structs.replace(after.header, version=1) == before.header
    assert not list(tmp_path.glob(".*"))  # no temporary file left
    assert main(["cassette", "upgrade", str(path)]) == 0
    assert "already format v2" in capsys.readouterr().out


def test_a_cut_v1_recording_is_upgraded_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "cut.cassette"
    records = [{"kind": "exchange", "id": f"x{i}", "response": {"chunks": [b"a"], "chunk_us": [i]}} for i in range(3)]
    write_v1(path, v1_header(id="r"), records, end=None)
    assert main(["cassette", "upgrade", str(path)]) == 0
    reader = CassetteReader(path)
    assert (
        reader.version == 2
        and list(reader) == [exchange(r) for r in records]
        and reader.end is None
        and not reader.damaged
    )


def test_a_damaged_v1_file_is_refused_and_left_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.cassette"
    data = bytearray(FIXTURE.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 16] = bytes(16)
    path.write_bytes(bytes(data))
    assert main(["cassette", "upgrade", str(path)]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert str(path) in err and "not upgraded" in err
    assert path.read_bytes() == bytes(data)
