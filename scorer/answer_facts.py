"""What a traffic line reads of a recorded answer's own reads besides its parse: the id the upstream gave the answer
(bench.scorer.sessions.response_id) and when its last read arrived.

Both come from the record alone, as its parse does, so the parse cache keeps them in the parse's entry
(bench.scorer.parse_cache): a second rescore reads neither the first event again nor every read's time.
"""

from __future__ import annotations

import msgspec

from bench.core.cassette.records import Exchange
from bench.scorer.sessions import response_id


class AnswerFacts(msgspec.Struct, array_like=True, frozen=True, gc=False):
    response_id: str | None
    last_read_us: int | None  # from the exchange's start; None: no read


def answer_facts(record: Exchange) -> AnswerFacts:
    reads = record.response.chunk_us
    return AnswerFacts(response_id(record), sum(reads) if reads else None)
