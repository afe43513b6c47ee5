"""The report as one JSON document: every number of the Report, for scripts and dashboards (bench.scorer.report.formats
writes it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.scorer.report.aggregate import Report

REPORT_FORMAT = "bench-report"
REPORT_VERSION = 1


def to_dict(report: Report) -> dict[str, Any]:
    """The report's JSON body (the json format turns NaN and infinities into null when it writes it)."""
    return {"format": REPORT_FORMAT, "version": REPORT_VERSION, **dataclasses.asdict(report)}
