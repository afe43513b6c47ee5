"""The replay index as its callers use it (proxy/recordings.py): which recording a request takes, in what order,
when a used-up fingerprint wraps, what is left unused, and how a miss is described."""

from __future__ import annotations

import json
from pathlib import Path

from bench.core.cassette.records import Exchange
from bench.proxy.matching import MatchOptions
from bench.proxy.recordings import Recorded, ReplayIndex, describe_miss, sent_done
from tests.scorer.helpers import write_cassette
from tests.support.records import exchange


def recorded(
    i: int,
    fp: str,
    body: object = None,
    *,
    started: int | None = None,
    cassette: str = "c.cassette",
    method: str = "POST",
    path: str = "/v1/chat/completions",
    query: str = "",
) -> Recorded:
    raw = json.dumps(body if body is not None else {"model": "m", "n": i}).encode()
    request = {"method": method, "path": path, "query": query, "body": raw, "fp": fp}
    started = i if started is None else started
    return Recorded(cassette, exchange(id=f"x{i}", started=started, request=request, response={"status": 200}))


def test_identical_requests_take_the_recordings_in_recorded_order_then_wrap_only_when_asked() -> None:
    # Given out of order: the index serves by start time.
    index = ReplayIndex([recorded(2, "fp1:a"), recorded(9, "fp1:b"), recorded(1, "fp1:a"), recorded(5, "fp1:a")])
    key = index.key_for("POST", "/v1/chat/completions", "", json.dumps({"model": "m"}).encode(), "fp1:a")
    assert key == "fp1:a"
    taken = [index.take(key, wrap=False) for _ in range(4)]
    assert [t.id if t else None for t in taken] == ["x1", "x2", "x5", None]
    assert index.take(key, wrap=False) is None  # still used up
    assert [r.id for r in index.unused()] == ["x9"]
    wrapped = ReplayIndex([recorded(2, "fp1:a"), recorded(1, "fp1:a")])
    assert [t.id if t else None for t in (wrapped.take("fp1:a", wrap=True) for _ in range(5))] == [
        "x1",
        "x2",
        "x1",
        "x2",
        "x1",
    ]
    assert index.take("fp1:unknown", wrap=True) is None


def test_unused_lists_what_no_request_took_across_fingerprints_in_recorded_order() -> None:
    index = ReplayIndex([recorded(4, "fp1:b"), recorded(1, "fp1:a"), recorded(3, "fp1:a"), recorded(2, "fp1:b")])
    assert [r.id for r in index.unused()] == ["x1", "x2", "x3", "x4"]
    index.take("fp1:a", wrap=False)
    assert [r.id for r in index.unused()] == ["x2", "x3", "x4"]
    index.take("fp1:b", wrap=False)
    index.take("fp1:b", wrap=False)
    assert [r.id for r in index.unused()] == ["x3"]
    assert len(index) == 4


def test_a_stream_request_and_a_json_request_have_their_own_keys() -> None:
    streamed = recorded(1, "fp1:a", {"model": "m", "stream": True})
    plain = recorded(2, "fp1:a", {"model": "m"})
    index = ReplayIndex([streamed, plain])
    ask_stream = index.key_for("POST", "/v1/chat/completions", "", b'{"model": "m", "stream": true}', "fp1:a")
    ask_json = index.key_for("POST", "/v1/chat/completions", "", b'{"model": "m"}', "fp1:a")
    assert ask_stream != ask_json
    first = index.take(ask_stream, wrap=False)
    second = index.take(ask_json, wrap=False)
    assert first is not None and first.id == "x1" and second is not None and second.id == "x2"


def test_the_index_counts_the_files_its_recordings_came_from() -> None:
    items = [recorded(1, "fp1:a", cassette="a.cassette"), recorded(2, "fp1:b", cassette="b.cassette")]
    assert ReplayIndex([*items, recorded(3, "fp1:c", cassette="a.cassette")]).files == 2
    assert ReplayIndex([]).files == 0
    assert ReplayIndex.load(Path("/nonexistent/bench-recordings")).files == 0


def test_a_recorded_exchange_gives_back_its_whole_record_and_a_missing_id_reads_as_a_question_mark() -> None:
    record = exchange(
        id="x1",
        started=7,
        request={"method": "POST", "path": "/v1/x", "body": b'{"a":1}', "fp": "fp1:q"},
        response={"status": 201, "chunks": [b"one", b"two"]},
        tags={"test": "t1"},
    )
    item = Recorded("c.cassette", record)
    assert item.record == record and item.record is not item.record  # unpacked anew each time
    assert (item.id, item.started, item.cassette, item.request.fp, item.request.body) == (
        "x1",
        7,
        "c.cassette",
        "fp1:q",
        b'{"a":1}',
    )
    assert Recorded("c.cassette", exchange(request={"fp": "fp1:q"}, response={"status": 200})).id == "?"


def test_done_split_across_the_last_two_reads_counts_and_an_earlier_done_does_not() -> None:
    assert sent_done([b"data: {}\n\ndata: [DO", b"NE]\n\n"])
    assert sent_done([b"data: {}\n\n", b"data: [DONE]\n\n"])
    assert not sent_done([b"data: [DONE]\n\n", b"data: {}\n\n", b"data: {}\n\n"])
    assert not sent_done([])


def test_nearest_compares_requests_as_the_fingerprint_does() -> None:
    # Method case, a trailing slash, query order and JSON key order and spacing are no differences.
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    item = recorded(1, "fp1:a", body, path="/v1/chat/completions", query="b=2&a=1")
    index = ReplayIndex([item])
    found = index.nearest(
        "post", "/v1/chat/completions/", "a=1&b=2", b'{"messages":[{"content":"hi","role":"user"}],"model":"m"}'
    )
    assert found is not None and found[1] == []
    # A query value, a key only on one side, a type (1 vs 1.0 or "2"), a list's length (this request's first): each
    # named where it is.
    found = index.nearest("POST", "/v1/chat/completions", "a=1&b=3", json.dumps({**body, "top_p": 1}).encode())
    assert found is not None and found[1] == ["body.top_p", "query.b"]
    numbers = ReplayIndex([recorded(1, "fp1:a", {"n": 1, "m": [1, 2]})])
    found = numbers.nearest("POST", "/v1/chat/completions", "", json.dumps({"n": 1.0, "m": [1, "2", 3]}).encode())
    assert found is not None and found[1] == ["body.m (length 3 vs 2)", "body.m[1]", "body.n"]
    # A body that is no JSON is compared as bytes.
    raw = ReplayIndex([recorded(1, "fp1:a", "x")])
    assert raw.nearest("POST", "/v1/chat/completions", "", b"not json")[1] == ["body"]  # type: ignore[index]


def test_of_equally_near_recordings_the_earliest_is_named() -> None:
    index = ReplayIndex(
        [recorded(3, "fp1:c", {"a": 3}), recorded(1, "fp1:a", {"a": 1}), recorded(2, "fp1:b", {"a": 2})]
    )
    found = index.nearest("POST", "/v1/chat/completions", "", b'{"a": 9}')
    assert found is not None and found[0].id == "x1" and found[1] == ["body.a"]


def test_a_miss_lists_up_to_eight_differences_in_full() -> None:
    item = recorded(7, "fp1:a")
    eight = [f"body.f{i}" for i in range(8)]
    message = describe_miss("POST", "/v1/x", "fp1:q", (item, eight), hint="HINT")
    assert message.endswith(f"which differs in: {', '.join(eight)}; HINT") and "more" not in message
    nine = describe_miss("POST", "/v1/x", "fp1:q", (item, [*eight, "body.f8"]), hint="HINT")
    assert nine.endswith(f"which differs in: {', '.join(eight)} and 1 more; HINT")


def test_another_method_and_another_path_weigh_the_same() -> None:
    # Neither outranks the other: of one recording on another route and one with another method (the same body),
    # the earlier recorded is named, whichever it is.
    body = {"model": "m"}
    for first, second in (("path", "method"), ("method", "path")):
        items = [
            recorded(
                i,
                f"fp1:{i}",
                body,
                method="GET" if kind == "method" else "POST",
                path="/v1/x" if kind == "path" else "/v1/chat/completions",
            )
            for i, kind in ((1, first), (2, second))
        ]
        found = ReplayIndex(items).nearest("POST", "/v1/chat/completions", "", json.dumps(body).encode())
        assert found is not None and found[0].id == "x1" and found[1] == [first], first


def test_bodies_of_other_kinds_or_not_json_are_named_as_the_body() -> None:
    def raw(body: bytes) -> Recorded:
        request = {"method": "POST", "path": "/v1/x", "body": body, "fp": "fp1:a"}
        return Recorded("c.cassette", exchange(id="x1", started=1, request=request, response={"status": 200}))

    for recorded_body, asked in ((b"[1]", b'{"a": 1}'), (b'"ab"', b"[1]"), (b"abc", b"abd"), (b'{"a": 1}', b"abc")):
        found = ReplayIndex([raw(recorded_body)]).nearest("POST", "/v1/x", "", asked)
        assert found is not None and found[1] == ["body"], (recorded_body, asked)
    same = ReplayIndex([raw(b"abc")]).nearest("POST", "/v1/x", "", b"abc")
    assert same is not None and same[1] == []


def test_only_slashes_are_trimmed_from_the_end_of_a_path() -> None:
    index = ReplayIndex([recorded(1, "fp1:a", path="/v1/boX")])
    found = index.nearest("POST", "/v1/bo", "", json.dumps({"model": "m", "n": 1}).encode())
    assert found is not None and found[1] == ["path"]


def test_an_index_of_a_folder_not_yet_there_keeps_its_match_options(tmp_path: Path) -> None:
    relaxed = MatchOptions(ignore=("user",))
    index = ReplayIndex.load(tmp_path / "not-yet", relaxed)
    assert len(index) == 0 and index.match is relaxed
    assert ReplayIndex.load(tmp_path / "not-yet").match.strict


def test_relaxed_matching_keys_a_live_request_as_the_recordings_were_keyed() -> None:
    # Ignoring `user`: another user (and so another fingerprint) still takes the recording; another method, path,
    # query or body field does not.
    body = {"model": "m", "user": "ann"}
    index = ReplayIndex([recorded(1, "fp1:a", body, query="q=1")], MatchOptions(ignore=("user",)))
    asked = json.dumps({"model": "m", "user": "bob"}).encode()
    key = index.key_for("POST", "/v1/chat/completions", "q=1", asked, "fp1:other")
    assert key != "fp1:other"
    others = [
        index.key_for("GET", "/v1/chat/completions", "q=1", asked, "fp1:other"),
        index.key_for("POST", "/v1/completions", "q=1", asked, "fp1:other"),
        index.key_for("POST", "/v1/chat/completions", "q=2", asked, "fp1:other"),
        index.key_for("POST", "/v1/chat/completions", "q=1", b'{"model": "n"}', "fp1:other"),
    ]
    assert all(index.take(k, wrap=True) is None for k in others)
    taken = index.take(key, wrap=False)
    assert taken is not None and taken.id == "x1"


def test_loading_passes_over_records_that_cannot_be_replayed_and_keeps_the_rest(tmp_path: Path) -> None:
    # A file whose first records are not replayable (no status; written by a replay session) still gives the rest.
    def rec(i: int, **fields: object) -> Exchange:
        request = {"path": "/v1/chat/completions", "body": b'{"n": %d}' % i, "fp": f"fp1:{i}"}
        return exchange({"id": f"x{i}", "started": i, "request": request, "response": {"status": 200}, **fields})

    records = [rec(1, response={"status": None}), rec(2, mode="replay"), rec(3), rec(4, response={}), rec(5)]
    write_cassette(tmp_path / "a.cassette", records)
    index = ReplayIndex.load(tmp_path)
    assert [r.id for r in index.all] == ["x3", "x5"] and index.files == 1
    taken = index.take("fp1:5", wrap=False)
    assert taken is not None and taken.record.request.body == b'{"n": 5}'
    relaxed = MatchOptions(ignore=("user",))
    assert ReplayIndex.load(tmp_path, relaxed).match is relaxed
