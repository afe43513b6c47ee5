"""Statistics the reports rest on: intervals, pass@k, paired tests and percentiles.

Small closed forms (Wilson, pass@k) are written out so that each line can be checked against a hand computation;
the exact binomial test and the bootstrap come from scipy, and percentiles from numpy (linear interpolation, the
definition vLLM's serving benchmark uses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# Two-sided 95%: the 0.975 quantile of the standard normal.
Z95 = 1.959963984540054


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when nothing was observed.

    Chosen over the normal approximation because it stays inside [0, 1] and behaves at 0/n and n/n, which are
    common for small test suites.
    """
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= passed <= n:
        raise ValueError(f"passed={passed} outside 0..{n}")
    p = passed / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): P(at least one of k samples drawn from n without replacement passes)."""
    _check_nck(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (tau-bench): P(all of k samples drawn from n without replacement pass)."""
    _check_nck(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_nck(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")


def mcnemar_exact(regressed: int, improved: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs against 1/2.

    Concordant pairs carry no information about a change, so only pass->fail and fail->pass counts enter.
    """
    discordant = regressed + improved
    if discordant == 0:
        return 1.0
    # Imported here: scipy.stats takes about a second to import and only compare needs it.
    from scipy.stats import binomtest

    return float(binomtest(regressed, discordant, 0.5, alternative="two-sided").pvalue)


def paired_bootstrap(
    before: Sequence[float], after: Sequence[float], *, resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """Mean of (after - before) over pairs and its percentile bootstrap interval, resampling pairs.

    Seeded so a report is reproducible. Returns (mean, low, high); with fewer than two pairs the interval is the
    point itself.
    """
    if len(before) != len(after):
        raise ValueError("paired samples differ in length")
    diffs = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    if diffs.size == 0:
        return (0.0, 0.0, 0.0)
    mean = float(diffs.mean())
    if diffs.size < 2:
        return (mean, mean, mean)
    rng = np.random.default_rng(seed)
    # Batches keep memory bounded (resamples x pairs indices would be gigabytes for 100k pairs).
    batch = max(1, 4_000_000 // diffs.size)
    means = np.concatenate(
        [
            diffs[rng.integers(0, diffs.size, size=(min(batch, resamples - start), diffs.size))].mean(axis=1)
            for start in range(0, resamples, batch)
        ]
    )
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return (mean, float(low), float(high))


def percentiles(values: Sequence[float] | np.ndarray, qs: Sequence[float]) -> list[float | None]:
    """Percentiles by linear interpolation between closest ranks (numpy's default); None for no data."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return [None for _ in qs]
    return [float(v) for v in np.percentile(arr, list(qs))]
