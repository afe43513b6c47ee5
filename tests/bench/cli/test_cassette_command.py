"""`bench cassette ls|show|export` on cassettes written by the real writer (no proxy, no aiohttp)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.core.cassette import CassetteWriter, repair
from bench.core.cassette.records import Settings
from tests.support.records import exchange

ROOT = Path(__file__).resolve().parents[3]


def sse(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    obj = {
        "model": "served-m",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    obj.update(extra)
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def stream_record(i: int) -> dict[str, Any]:
    chunks = [
        sse({"role": "assistant", "content": ""}),
        sse({"content": "Hello"}),
        sse({"content": " world"}),
        sse({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": '{"ci'}}]}),
        sse({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}]}),
        sse({}, "tool_calls"),
        b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}\n\n',
        b"data: [DONE]\n\n",
    ]
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Weather in Oslo?"}]}
    return {
        "id": f"x{i}",
        "started": 1_700_000_000_000_000 + i * 1000,
        "mode": "record",
        "request": {
            "method": "POST",
            "path": "/v1/chat/completions",
            "query": "",
            "headers": [["Content-Type", "application/json"], ["Authorization", "Bearer sk-abcdefghijkl"]],
            "body": json.dumps(body).encode(),
            "fp": "fp1:00",
        },
        "response": {
            "status": 200,
            "headers": [["Content-Type", "text/event-stream"]],
            "chunks": chunks,
            "chunk_us": [1000] * len(chunks),
            "streamed": True,
            "raw_bytes": sum(map(len, chunks)),
        },
        "timing": {
            "sent_upstream": 10,
            "headers": 500,
            "first_byte": 1000,
            "first_token": 2000,
            "end": 9000,
            "proxy_us": 80,
            "loop_lag_us": 1500,
        },
        "upstream": {
            "url": "http://up:1",
            "system_fingerprint": "fp_1",
            "model": "served-m",
            "server": "s",
            "headers": {},
        },
        "outcome": "complete",
        "error": None,
        "tags": {"run": "r1", "test": "weather"},
        "replay_of": None,
    }


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "c" / "a.cassette"
    with CassetteWriter(path, settings=Settings(mode="record")) as writer:
        for i in (1, 2):
            writer.put(exchange(stream_record(i)))
        writer.put(
            exchange(
                {
                    **stream_record(3),
                    "response": {**stream_record(3)["response"], "chunks": [b"\xff\x00"], "chunk_us": [5]},
                }
            )
        )
    return path


def test_ls_prints_a_line_per_cassette(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cassette", "ls", str(cassette.parent)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert "3 exchange(s)" in out[0] and "served-m" in out[0] and "on disk" in out[0] and "x)" in out[0]


def test_show_assembles_text_and_tool_calls(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cassette", "show", str(cassette), "--id", "x2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("x2  POST /v1/chat/completions  -> 200  complete")
    assert "Hello world" in out and "get_weather" in out and '{"city":"Oslo"}' in out
    assert "[user] Weather in Oslo?" in out and "tags: run=r1 test=weather" in out
    assert "finish_reason tool_calls" in out and "total_tokens=9" in out
    assert "proxy's longest loop stall 1.5 ms" in out
    assert "sk-abcdefghijkl" not in out


def test_show_unknown_id_is_a_one_line_error(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cassette", "show", str(cassette), "--id", "x9"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "x1, x2, x3" in err[0]


def test_export_jsonl_keeps_every_byte(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cassette", "export", str(cassette)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in lines] == ["x1", "x2", "x3"]
    assert "".join(lines[0]["response"]["chunks"]).encode() == b"".join(stream_record(1)["response"]["chunks"])
    assert lines[2]["response"]["chunks"] == [{"base64": "/wA="}]


def test_export_har(cassette: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.har"
    assert main(["cassette", "export", str(cassette), "--format", "har", "-o", str(out)]) == 0
    har = json.loads(out.read_text())
    assert har["log"]["version"] == "1.2" and len(har["log"]["entries"]) == 3
    entry = har["log"]["entries"][0]
    assert entry["request"]["url"] == "http://up:1/v1/chat/completions" and entry["response"]["status"] == 200
    assert entry["response"]["content"]["mimeType"] == "text/event-stream"
    assert "Hello" in entry["response"]["content"]["text"] and entry["_bench"]["tags"]["run"] == "r1"
    assert har["log"]["entries"][2]["response"]["content"]["encoding"] == "base64"


@pytest.mark.parametrize("content", [b"", b"not a cassette at all", b"\x28\xb5\x2f\xfd garbage after magic"])
def test_foreign_or_corrupt_files_get_one_line_and_nonzero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    bad = tmp_path / "bad.cassette"
    bad.write_bytes(content)
    for argv in (["show", str(bad)], ["export", str(bad)], ["ls", str(tmp_path)]):
        assert main(["cassette", *argv]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bench: error: ") and "bad.cassette" in err[0]


def test_a_cut_file_shows_what_it_holds_and_warns(cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = cassette.with_name("cut.cassette")
    data = cassette.read_bytes()
    cut.write_bytes(data[: data.rfind(repair.MAGIC) - 40])  # into the last frame, before its repair frame
    assert main(["cassette", "export", str(cut)]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) >= 1 and "warning" in captured.err


def test_the_command_never_imports_aiohttp() -> None:
    code = "import sys, bench.cli.cassette_command, bench.core.parse; sys.exit('aiohttp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr or "bench.cli.cassette_command imported aiohttp"


def test_a_damaged_file_is_named_with_what_was_skipped_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small zstd frames: the frames after the damaged one are read again.
    monkeypatch.setattr("bench.core.cassette.compact.SEGMENT_BYTES", 8000)
    path = tmp_path / "d.cassette"
    with CassetteWriter(path) as w:
        for i in range(40):
            w.put(exchange(stream_record(i)))
    data = bytearray(path.read_bytes())
    end = data.find(repair.MAGIC, len(data) // 2)  # a frame in the middle ends there, its repair frame follows
    data[end - 300 : end - 292] = bytes(8)
    data[end + 12] ^= 0xFF  # and its repair frame: beyond repair
    path.write_bytes(bytes(data))
    assert main(["cassette", "export", str(path)]) == 0
    captured = capsys.readouterr()
    exported = captured.out.splitlines()
    [warning] = captured.err.strip().splitlines()
    assert warning.startswith(f"bench: warning: {path}: read {len(exported)} exchange(s); ")
    assert "record(s) lost to damage" in warning
    ids = [json.loads(line)["id"] for line in exported]
    assert ids[0] == "x0" and ids[-1] == "x39" and len(ids) < 40
    assert main(["cassette", "ls", str(tmp_path)]) == 0
    [line] = capsys.readouterr().out.strip().splitlines()
    assert f"{len(exported)} exchange(s)" in line and "[" in line


def _obj(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required), "properties": {**required, **optional}}


_NAME_VALUE = {"type": "array", "items": _obj({"name": {"type": "string"}, "value": {"type": "string"}})}
_INT = {"type": "integer"}
_STR = {"type": "string"}
_DURATION = {"type": "number", "minimum": 0}  # send, wait and receive must be non-negative
_OPTIONAL_DURATION = {"type": "number", "minimum": -1}  # blocked, dns, connect, ssl: -1 when they do not apply
# What HAR 1.2 (the W3C Web Performance group's draft of the format) requires of a log and its entries.
HAR_1_2 = _obj(
    {
        "log": _obj(
            {
                "version": {"const": "1.2"},
                "creator": _obj({"name": _STR, "version": _STR}),
                "entries": {
                    "type": "array",
                    "items": _obj(
                        {
                            "startedDateTime": {
                                "type": "string",
                                "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$",
                            },
                            "time": {"type": "number", "minimum": 0},
                            "request": _obj(
                                {
                                    "method": _STR,
                                    "url": {"type": "string", "pattern": "^https?://"},
                                    "httpVersion": _STR,
                                    "cookies": {"type": "array"},
                                    "headers": _NAME_VALUE,
                                    "queryString": _NAME_VALUE,
                                    "headersSize": _INT,
                                    "bodySize": _INT,
                                },
                                postData=_obj({"mimeType": _STR}, text=_STR),
                            ),
                            "response": _obj(
                                {
                                    "status": _INT,
                                    "statusText": _STR,
                                    "httpVersion": _STR,
                                    "cookies": {"type": "array"},
                                    "headers": _NAME_VALUE,
                                    "content": _obj({"size": _INT, "mimeType": _STR}, text=_STR, encoding=_STR),
                                    "redirectURL": _STR,
                                    "headersSize": _INT,
                                    "bodySize": _INT,
                                }
                            ),
                            "cache": {"type": "object"},
                            "timings": _obj(
                                {"send": _DURATION, "wait": _DURATION, "receive": _DURATION},
                                blocked=_OPTIONAL_DURATION,
                                dns=_OPTIONAL_DURATION,
                                connect=_OPTIONAL_DURATION,
                                ssl=_OPTIONAL_DURATION,
                            ),
                        }
                    ),
                },
            }
        )
    }
)


def test_har_export_is_valid_har_1_2(cassette: Path, tmp_path: Path) -> None:
    import datetime as dt

    import jsonschema

    # A replay miss has no upstream timings at all: its entry must still carry send, wait and receive.
    miss = {**stream_record(4), "timing": {"end": 120}, "query": "a=1&b=", "upstream": {}}
    miss["request"] = {**miss["request"], "query": "a=1&b="}
    path = tmp_path / "d" / "b.cassette"
    with CassetteWriter(path, settings=Settings(mode="replay")) as writer:
        writer.put(exchange(stream_record(1)))
        writer.put(exchange(miss))
    for source in (cassette, path):
        out = tmp_path / f"{source.stem}.har"
        assert main(["cassette", "export", str(source), "--format", "har", "-o", str(out)]) == 0
        har = json.loads(out.read_text())
        jsonschema.validate(har, HAR_1_2)
        for entry in har["log"]["entries"]:
            started = dt.datetime.fromisoformat(entry["startedDateTime"])
            assert started.tzinfo is not None and started.year == 2023
            timings = entry["timings"]
            assert entry["time"] == pytest.approx(sum(v for v in timings.values() if v != -1))
    first = json.loads((tmp_path / "a.har").read_text())["log"]["entries"][0]
    assert first["startedDateTime"] == "2023-11-14T22:13:20.001000Z"
    assert first["timings"] == {"send": 0.01, "wait": 0.99, "receive": 8.0} and first["time"] == 9.0
    replayed = json.loads((tmp_path / "b.har").read_text())["log"]["entries"][1]
    assert replayed["request"]["url"] == "http://bench-replay/v1/chat/completions?a=1&b="
    assert replayed["request"]["queryString"] == [{"name": "a", "value": "1"}, {"name": "b", "value": ""}]
