"""Full-text search over prompts and answers (server-side, paged), and the filtered table as CSV."""

from __future__ import annotations

import csv
import io
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bench.cli import main
from bench.core.cassette import CassetteWriter
from bench.scorer.synth import exchange_record, sse_chunks
from bench.view import search
from bench.view.index import Index, open_index
from bench.view.web_app import make_app

# (model, prompt, answer) of untagged exchanges x0..x5: each result is one exchange, test = "traffic.cassette#xN".
TRAFFIC = [
    ("m1", "Where is Zanzibar?", "Off the coast of Tanzania."),
    ("m1", "Name a marsupial.", "The Quokka lives on Rottnest Island."),
    ("m2", "Capital of France?", "Paris."),
    ("m2", "And of Italy? Not Paris.", "Rome."),
    ("=1+2", "Formula model?", "@SUM(A1:A9) is not a formula here."),
    ("m3", "Say ünïcode", "ÜNÏCODE and unicode"),
]


@pytest.fixture(scope="module")
def traffic_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    folder = tmp_path_factory.mktemp("traffic")
    with CassetteWriter(folder / "traffic.cassette") as writer:
        for i, (model, prompt, answer) in enumerate(TRAFFIC):
            request = {"model": model, "stream": True, "messages": [{"role": "user", "content": prompt}]}
            writer.put(exchange_record(sse_chunks(answer, model=model), id=f"x{i}", request=request))
    assert main(["rescore", str(folder)]) == 0
    return open_index([folder])


def _until_complete(index: Index, words: str) -> Any:
    """The search's answer once it has read every cassette (bounded: only a broken build takes a minute)."""
    deadline = time.monotonic() + 60
    while True:
        found, state = index.search.find(words)
        if state.complete or time.monotonic() > deadline:
            return found, state
        time.sleep(0.05)


def _matched(index: Index, words: str) -> list[str]:
    found, state = _until_complete(index, words)
    assert state.complete and state.searched == state.of == len(TRAFFIC)
    return sorted(index.rows[n].test.removeprefix("traffic.cassette#") for n, hit in enumerate(found.rows) if hit)


def test_search_finds_prompts_and_answers_case_insensitively(traffic_index: Index) -> None:
    assert _matched(traffic_index, "zanzibar") == ["x0"]  # a prompt
    assert _matched(traffic_index, "QUOKKA LIVES") == ["x1"]  # an answer, across a piece boundary of the stream
    assert _matched(traffic_index, "paris") == ["x2", "x3"]  # an answer, and another's prompt
    assert _matched(traffic_index, "ünïcode") == ["x5"]  # non-ASCII letters match as written
    assert _matched(traffic_index, "nowhere at all") == []
    found, _ = traffic_index.search.find("quokka")
    (snippet,) = found.snippets.values()
    assert "The Quokka lives on Rottnest Island." in snippet  # the text as written, not lowered


async def test_the_results_api_searches_text_and_test_ids_and_pages(traffic_index: Index) -> None:
    _until_complete(traffic_index, "paris")
    async with TestClient(TestServer(make_app(traffic_index))) as client:
        body = await (await client.get("/api/results", params={"q": "paris", "limit": "1"})).json()
        assert body["total"] == 2 and len(body["rows"]) == 1 and body["search"]["complete"]
        (row,) = body["rows"]
        assert "paris" in body["snippets"][str(row["n"])].lower()
        second = await (await client.get("/api/results", params={"q": "paris", "limit": "1", "offset": "1"})).json()
        assert {row["test"], second["rows"][0]["test"]} == {"traffic.cassette#x2", "traffic.cassette#x3"}
        by_id = await (await client.get("/api/results", params={"q": "#X4"})).json()
        assert [r["test"] for r in by_id["rows"]] == ["traffic.cassette#x4"]  # the test id still matches
        hostile = await client.get("/api/results", params={"q": "\x00" * 3 + "a" * 2_000})
        assert hostile.status == 200 and (await hostile.json())["total"] == 0


async def test_the_filtered_table_exports_as_csv_without_formulas(traffic_index: Index) -> None:
    async with TestClient(TestServer(make_app(traffic_index))) as client:
        response = await client.get("/api/results.csv", params={"sort": "model", "desc": "1", "offset": "3"})
        assert response.status == 200 and response.headers["Content-Type"].startswith("text/csv")
        assert "attachment" in response.headers["Content-Disposition"]
        table = list(csv.DictReader(io.StringIO(await response.text())))
        page = await (await client.get("/api/results", params={"sort": "model", "desc": "1"})).json()
        # Every row the filters keep (offset and limit are the page's, not the export's), in the table's order.
        assert [r["test"] for r in table] == [r["test"] for r in page["rows"]] and len(table) == len(TRAFFIC)
        assert "'=1+2" in [r["model"] for r in table]  # a spreadsheet would have run it as a formula
        only = await client.get("/api/results.csv", params={"model": "m2", "q": "italy"})
        assert [r["test"] for r in csv.DictReader(io.StringIO(await only.text()))] == ["traffic.cassette#x3"]
        assert (await client.get("/api/results.csv", params={"sort": "nope"})).status == 400


def test_a_search_stopped_by_its_time_bound_goes_on_when_asked_again(
    traffic_index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    _until_complete(traffic_index, "m")
    monkeypatch.setattr(search, "SCAN_SECONDS", -1.0)  # every scan stops at its first check
    monkeypatch.setattr(search, "CHECK_EVERY", 1)
    states = []
    for _ in range(len(TRAFFIC) + 1):
        found, state = traffic_index.search.find("?")
        states.append(state)
        if state.complete:
            break
    assert not states[0].complete and states[0].why == "the scan reached its time bound"
    assert states[-1].complete and sum(found.rows) == 4  # the four prompts with a question mark


def test_a_multi_turn_result_is_found_once_and_its_conversation_written_once(demo_index: Index) -> None:
    row = next(r for r in demo_index.rows if r.test == "agent.fix_all" and r.model == "oracle")
    found, state = _until_complete(demo_index, "Make the whole test suite pass")
    assert state.complete and found.rows[row.n]
    matched = [demo_index.rows[n] for n, hit in enumerate(found.rows) if hit]
    assert {r.test for r in matched} == {"agent.fix_all"}  # its prompt, in every model's result of it
    # Its five requests repeat the conversation; the text file holds the system prompt once for this result.
    search_text = demo_index.search._text
    search_text.seek(0)
    text = search_text.read()
    mine = [k for k, owner in enumerate(demo_index.search._owners) if owner == row.n]
    assert len(mine) == 5
    starts = demo_index.search._starts
    written = b"".join(text[starts[k] : starts[k + 1] if k + 1 < len(starts) else len(text)] for k in mine)
    assert written.count(b"You are a coding agent") == 1


def test_the_search_files_are_temporary_and_nothing_is_written_beside_the_cassettes(
    traffic_index: Index, tmp_path: Path
) -> None:
    _until_complete(traffic_index, "x")
    folder = Path(str(next(iter(traffic_index._cassettes)))).parent
    assert sorted(p.name for p in folder.iterdir()) == ["scores.jsonl", "traffic.cassette"]
    # Open files already unlinked (or never linked: O_TMPFILE): nothing is left behind, even by a kill.
    assert not list(Path(tempfile.gettempdir()).glob("bench-view-*"))
