from __future__ import annotations

import json

from proxy.recorder import MAX_WATCHED_EVENTS, Exchange, TokenWatch, carries_token, stream_finished


def sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return sse({"model": "m1", "system_fingerprint": "fp_x", "choices": [{"delta": delta, "finish_reason": finish}]})


def test_tokens_are_content_reasoning_or_tool_calls_never_the_role_frame() -> None:
    assert not carries_token({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    assert not carries_token({"choices": [], "usage": {"total_tokens": 3}})
    assert carries_token({"choices": [{"delta": {"content": "Hi"}}]})
    assert carries_token({"choices": [{"delta": {"reasoning_content": "hmm"}}]})
    assert carries_token({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "f"}}]}}]})
    assert carries_token({"choices": [{"text": "legacy"}]})
    assert carries_token({"type": "response.output_text.delta", "delta": "x"})
    assert not carries_token({"choices": "garbage"}) and not carries_token([1])


def test_token_watch_finds_the_first_token_across_split_reads() -> None:
    watch = TokenWatch()
    data = chunk({"role": "assistant", "content": ""}) + chunk({"content": "Hello"})
    assert not watch.feed(data[:10])
    assert watch.feed(data[10:]) and watch.found
    assert (watch.model, watch.system_fingerprint) == ("m1", "fp_x")


def test_token_watch_gives_up_on_long_tokenless_streams() -> None:
    watch = TokenWatch()
    done = [watch.feed(b": keepalive\n\ndata: {}\n\n") for _ in range(MAX_WATCHED_EVENTS)]
    assert done[-1] and not any(done[:-1]) and not watch.found


def test_stream_end_detection() -> None:
    assert stream_finished([chunk({"content": "a"}), b"data: [DONE]\n\n"])
    assert stream_finished([chunk({}, "stop")])  # finish_reason without [DONE]
    assert not stream_finished([chunk({"content": "a"}), chunk({"content": "b"})])
    assert not stream_finished([])


def test_record_times_are_microsecond_deltas_from_t0() -> None:
    ex = Exchange(
        t0=1_000_000_000,
        started_us=5,
        mode="record",
        method="POST",
        path="/v1/x",
        query="",
        req_headers=[],
        body=b"{}",
        fp="fp1:0",
        tags={},
        upstream_url="http://u",
    )
    ex.streamed = True
    ex.chunks = [chunk({"content": "a"}), b"data: [DONE]\n\n"]
    ex.times = [1_002_000_000, 1_002_500_000]
    ex.settle_stream()
    record = ex.to_record(end_ns=1_003_000_000)
    assert record.response.chunk_us == [2000, 500]
    assert record.timing.first_byte == 2000 and record.timing.end == 3000
    assert record.outcome == "complete" and record.response.raw_bytes == sum(map(len, ex.chunks))
