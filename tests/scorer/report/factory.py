"""Scores files built by hand, following docs/scores-format.md line for line (the reports' input contract).

Also used by benchmarks/report_speed.py to generate a large realistic file.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson

from bench.scorer.results import Meta, Result

CATALOG_HASH = "sha256:" + "c" * 64


def meta(
    *,
    catalog_hash: str = CATALOG_HASH,
    scorer_version: str = "1.0",
    evaluators: dict[str, int] | None = None,
    cassettes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "kind": "meta",
        "format": "bench-scores",
        "version": 1,
        "bench_version": "0.1.0",
        "scorer_version": scorer_version,
        "parser_version": 1,
        "catalog_hash": catalog_hash,
        "evaluators": evaluators if evaluators is not None else {"contains_all": 1, "tool_called": 2},
        "budgets": {"max_tokens": None, "deadline_s": None},
        "cassettes": cassettes
        if cassettes is not None
        else [
            {
                "path": "run.cassette",
                "run": "r-1",
                "created": "2025-01-01T00:00:00Z",
                "truncated": False,
                "settings": {"mode": "record"},
                "run_meta": {"run": "r-1", "catalog_hash": catalog_hash},
            }
        ],
    }


def exchange(
    ident: str,
    *,
    ttft_us: int | None = 30_000,
    itl_us: list[int] | None = None,
    output_tokens: int | None = None,
    tokens_source: str = "usage",
    outcome: str = "complete",
    status: int = 200,
    final: bool = True,
    attempt: int = 1,
    turn: int = 0,
    loop_lag_us: int | None = None,
) -> dict[str, Any]:
    """An exchange whose E2EL and TPOT follow from TTFT and the gaps, as the scorer's parser computes them."""
    gaps = [5_000, 5_000] if itl_us is None else itl_us
    if ttft_us is None or outcome != "complete":
        return {
            "id": ident,
            "turn": turn,
            "attempt": attempt,
            "outcome": outcome,
            "status": status,
            "final": final,
            "ttft_us": None,
            "e2el_us": None,
            "tpot_us": None,
            "itl_us": None,
            "output_tokens": None,
            "tokens_source": None,
            "n_events": 0,
            "loop_lag_us": loop_lag_us,
        }
    tokens = len(gaps) + 1 if output_tokens is None else output_tokens
    e2el = ttft_us + sum(gaps)
    return {
        "id": ident,
        "turn": turn,
        "attempt": attempt,
        "outcome": outcome,
        "status": status,
        "final": final,
        "ttft_us": ttft_us,
        "e2el_us": e2el,
        "tpot_us": (e2el - ttft_us) / (tokens - 1) if tokens > 1 else None,
        "itl_us": gaps,
        "output_tokens": tokens,
        "tokens_source": tokens_source,
        "n_events": len(gaps) + 1,
        "loop_lag_us": loop_lag_us,
    }


def result(
    test: str,
    model: str,
    *,
    passed: bool | None = True,
    status: str = "scored",
    epoch: int = 0,
    run: str = "r-1",
    suite: str | None = None,
    category: str = "general",
    failure_type: str | None = None,
    fingerprint: str | None = "fp_1",
    served_model: str | None = None,
    settings: dict[str, Any] | None = None,
    exchanges: list[dict[str, Any]] | None = None,
    retries: int = 0,
    test_hash: str = "th",
    cassette: str = "run.cassette",
) -> dict[str, Any]:
    scored = status == "scored"
    if scored and not passed and failure_type is None:
        failure_type = "wrong_args"
    return {
        "kind": "result",
        "run": run,
        "cassette": cassette,
        "test": test,
        "suite": suite or test.split(".")[0],
        "category": category,
        "subcategory": "x",
        "model": model,
        "served_model": served_model or f"{model}-served",
        "system_fingerprint": fingerprint,
        "epoch": epoch,
        "status": status,
        "score": (1.0 if passed else 0.0) if scored else None,
        "passed": passed if scored else None,
        "failure_type": failure_type if (scored and not passed) or status == "errored" else None,
        "checks": [],
        "findings": [],
        "test_hash": test_hash,
        "catalog_test_hash": test_hash,
        "settings": settings
        if settings is not None
        else {"temperature": 0.0, "seed": 7, "max_tokens": 256, "stream": True},
        "attempts": retries + 1,
        "retries": retries,
        "exchanges": exchanges if exchanges is not None else [exchange(f"x-{model}-{test}-{epoch}")],
    }


def typed(line: dict[str, Any]) -> Result:
    """A result line as the reports get it from the scores file's reader."""
    return msgspec.convert(line, Result)


def typed_meta(**kw: Any) -> Meta:
    """A meta line as the scores file's reader gives it."""
    return msgspec.convert(meta(**kw), Meta)


def write_scores(path: Path, meta_line: dict[str, Any], results: list[dict[str, Any]]) -> Path:
    """Write as the contract says: sorted keys, compact separators, results sorted by model, test, epoch, run."""
    ordered = sorted(results, key=lambda r: (r["model"], r["test"], r["epoch"], r["run"]))
    lines = [orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in [meta_line, *ordered]]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


FAILURES = ("wrong_args", "no_call", "wrong_tool", "invalid_json", "outcome_mismatch", "text_tool_call")
SUITES = {
    "tools": ("tool_calling", "parallel_calls"),
    "json": ("structured_output",),
    "code": ("coding", "patching"),
    "chat": ("instruction_following", "refusal"),
}


def synthetic(n_results: int, *, seed: int = 1, models: int = 4, epochs: int = 5) -> list[dict[str, Any]]:
    """A realistic spread: models of different skill and speed, flaky tests, retries, errors, 50-300 ITL gaps."""
    rng = random.Random(seed)
    gauss = np.random.default_rng(seed)  # the bulk of the numbers: numpy draws them ~50x faster
    names = [f"model-{chr(ord('a') + i)}" for i in range(models)]
    tests_needed = max(1, -(-n_results // (models * epochs)))
    suite_names = sorted(SUITES)
    tests = []
    for i in range(tests_needed):
        suite = suite_names[i % len(suite_names)]
        categories = SUITES[suite]
        tests.append((f"{suite}.t{i:05d}", categories[(i // len(suite_names)) % len(categories)], rng.random()))
    out: list[dict[str, Any]] = []
    for m, model in enumerate(names):
        skill, itl_base = 0.55 + 0.1 * m, 4_000 + 3_000 * m
        for test, category, difficulty in tests:
            for epoch in range(epochs):
                if len(out) >= n_results:
                    return out
                roll = rng.random()
                status = "errored" if roll < 0.01 else "skipped" if roll < 0.015 else "scored"
                passed = rng.random() < skill * (1.2 - difficulty) if status == "scored" else None
                retries = 1 if rng.random() < 0.03 else 0
                exchanges = []
                if retries:
                    exchanges.append(exchange(f"x{len(out)}r", outcome="upstream_error", status=502, final=False))
                if status == "errored":
                    exchanges.append(exchange(f"x{len(out)}", outcome="timeout", status=504, attempt=retries + 1))
                else:
                    gaps = (
                        np.maximum(100, gauss.normal(itl_base, itl_base / 4, rng.randint(50, 300))).astype(int).tolist()
                    )
                    exchanges.append(
                        exchange(
                            f"x{len(out)}",
                            ttft_us=int(rng.lognormvariate(10.5 + 0.2 * m, 0.4)),
                            itl_us=gaps,
                            attempt=retries + 1,
                            tokens_source="counted" if m == models - 1 else "usage",
                        )
                    )
                out.append(
                    result(
                        test,
                        model,
                        passed=passed,
                        status=status,
                        epoch=epoch,
                        category=category,
                        failure_type="timeout"
                        if status == "errored"
                        else rng.choice(FAILURES)
                        if passed is False
                        else None,
                        fingerprint=f"fp_{model}",
                        exchanges=exchanges,
                        retries=retries,
                    )
                )
    return out
