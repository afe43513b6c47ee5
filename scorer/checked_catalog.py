"""The catalog as the scorer loads it: every check's evaluator and arguments checked against the registry."""

from __future__ import annotations

from pathlib import Path

from bench.catalog.model import Catalog
from bench.catalog.model import load_catalog as load_model
from bench.scorer.checks import CHECK_RULES


def load_catalog(path: Path | None = None) -> Catalog:
    """Every suite under `path` (None: the built-in suites), checks validated; BenchError if anything is wrong."""
    return load_model(path, rules=CHECK_RULES)
