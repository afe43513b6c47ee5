"""The report as one JSON document: every number of the Report, for scripts and dashboards."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import orjson

from scorer.report.aggregate import Report

REPORT_FORMAT = "bench-report"
REPORT_VERSION = 1


def _finite(value: Any) -> Any:
    # JSON has no NaN/inf; a distribution with no data is already None, this only guards the odd division.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def to_dict(report: Report) -> dict[str, Any]:
    body = _finite(dataclasses.asdict(report))
    return {"format": REPORT_FORMAT, "version": REPORT_VERSION, **body}


def render(report: Report) -> str:
    return orjson.dumps(to_dict(report), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
