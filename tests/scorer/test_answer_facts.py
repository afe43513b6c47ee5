"""bench.scorer.answer_facts: the answer's id and its last read's time, read from hand-written records."""

from __future__ import annotations

from bench.scorer.answer_facts import AnswerFacts, answer_facts
from tests.support.records import exchange


def test_a_stream_gives_its_first_events_id_and_the_sum_of_its_read_times() -> None:
    chunks = [b'data: {"id":"chatcmpl-A1","choices":[]}\n\n', b"data: [DONE]\n\n"]
    record = exchange(response={"status": 200, "streamed": True, "chunks": chunks, "chunk_us": [120, 30]})
    assert answer_facts(record) == AnswerFacts("chatcmpl-A1", 150)


def test_no_reads_no_facts_and_a_failed_answer_no_id() -> None:
    assert answer_facts(exchange(response={"status": 200, "chunks": [], "chunk_us": []})) == AnswerFacts(None, None)
    failed = exchange(response={"status": 500, "chunks": [b'{"id":"x"}'], "chunk_us": [9]})
    assert answer_facts(failed) == AnswerFacts(None, 9)
