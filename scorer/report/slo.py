"""Service-level objectives and goodput, as vLLM's serving benchmark defines them (`--goodput ttft:MS tpot:MS
e2el:MS`): a request is good when it completed and each metric named is at or under its bound; goodput is good
requests per second over the level's wall time, and SLO attainment good requests over the level's requests (a
failed request is never good). A non-streamed answer's first token came with its body (TTFT = E2EL); an answer of
one token has no TPOT (0, as vLLM counts it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.core.errors import BenchError
from bench.scorer.results import TrafficLine

METRICS = ("ttft", "tpot", "e2el")


def parse_slo(items: Sequence[str]) -> dict[str, float]:
    """`["ttft:200", "tpot:50"]` (or one "ttft:200,tpot:50") -> {"ttft": 200.0, "tpot": 50.0}, milliseconds."""
    out: dict[str, float] = {}
    for item in (part for text in items for part in text.replace(",", " ").split()):
        name, _, value = item.partition(":")
        name = name.strip().lower()
        try:
            bound = float(value)
        except ValueError:
            bound = -1.0
        if name not in METRICS or not bound > 0:
            raise BenchError(f"--slo {item!r}: give METRIC:MS with METRIC one of {', '.join(METRICS)} (ttft:200)")
        out[name] = bound
    return out


def describe(slo: Mapping[str, float]) -> str:
    return " ".join(f"{k}:{v:g}" for k, v in slo.items()) or "none"


def good(line: TrafficLine, slo: Mapping[str, float]) -> bool:
    """Whether an exchange meets every bound of the SLO (an exchange that failed never does)."""
    if line.failed:
        return False
    e2el = line.e2el_us
    values = {
        "ttft": line.ttft_us if line.ttft_us is not None else e2el,
        "tpot": line.tpot_us if line.tpot_us is not None else 0.0,
        "e2el": e2el,
    }
    for name, bound_ms in slo.items():
        value = values.get(name)
        if value is None or value > bound_ms * 1000:
            return False
    return True
