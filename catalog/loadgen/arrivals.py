"""When open-loop requests are due: constant, Poisson or gamma (bursty) arrivals at a mean rate, as offsets in
seconds from the level's start. The first request is due at 0; the gaps after it are 1/rate each (constant),
exponential with mean 1/rate (Poisson), or gamma with shape `burstiness` and mean 1/rate (vLLM's `--burstiness`:
below 1 burstier than Poisson, above 1 more regular, 1 is Poisson). Seeded: a run's arrivals are reproducible.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from bench.core.errors import BenchError

ARRIVALS = ("constant", "poisson", "gamma")
_BATCH = 1024  # gaps drawn at a time (numpy's draw is per call, not per value)


def offsets(arrival: str, rate: float, *, burstiness: float = 1.0, seed: int = 0) -> Iterator[float]:
    """An endless, increasing sequence of due times (seconds) for arrivals at `rate` per second."""
    if not rate > 0:
        raise BenchError(f"a request rate must be above 0 (got {rate:g})")
    if arrival == "constant":
        return (i / rate for i in itertools.count())
    if arrival == "poisson":
        shape = 1.0
    elif arrival == "gamma":
        if not burstiness > 0:
            raise BenchError(f"--burstiness must be above 0 (got {burstiness:g}); 1 is Poisson")
        shape = burstiness
    else:
        raise BenchError(f"unknown arrival {arrival!r}; choose one of {', '.join(ARRIVALS)}")
    return _gamma(rate, shape, np.random.default_rng(seed))


def _gamma(rate: float, shape: float, rng: np.random.Generator) -> Iterator[float]:
    at = 0.0
    yield at
    scale = 1.0 / (rate * shape)  # mean gap shape * scale = 1 / rate
    while True:
        for gap in rng.gamma(shape, scale, _BATCH).tolist():
            at += gap
            yield at
