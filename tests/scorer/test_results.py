from __future__ import annotations

import msgspec

from bench.scorer.results import ENCODER, RESULT_DECODER, CheckScore, ExchangeScore, Result, scores_only


def test_a_result_read_back_for_its_scores_has_everything_but_its_exchanges() -> None:
    exchanges = [ExchangeScore(id=f"x{i}", turn=i, itl_us=list(range(300))) for i in range(2)]
    checks = [CheckScore(evaluator="regex", version=1, args={"pattern": "a"}, status="scored", score=0.5)]
    whole = Result(
        run="r", test="t.one", model="m", epoch=3, score=0.5, passed=False, checks=checks, exchanges=exchanges
    )
    line = ENCODER.encode(whole) + b"\n"
    read = scores_only(line)
    assert isinstance(read, Result) and read.exchanges == []
    expected = RESULT_DECODER.decode(line)
    expected.exchanges = []
    assert msgspec.structs.asdict(read) == msgspec.structs.asdict(expected)
    assert ENCODER.encode(read) == ENCODER.encode(expected)  # written again, it is the same line less its exchanges
