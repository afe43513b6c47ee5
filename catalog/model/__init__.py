"""The catalog's model (what a test is: `spec`) and its loader (YAML suites into that model: `loader`).

The scorer imports this package and never the driver or the simulator, so nothing here may import aiohttp.
"""

from __future__ import annotations

from pathlib import Path

from bench.catalog.model.check_rules import CheckRules
from bench.catalog.model.spec import Catalog, Check, Limits, RefCall, Reference, TestSpec, Workspace

__all__ = ["Catalog", "Check", "CheckRules", "Limits", "RefCall", "Reference", "TestSpec", "Workspace", "load_catalog"]


def load_catalog(path: Path | None, *, rules: CheckRules | None) -> Catalog:
    """Load and validate every *.yaml suite under `path` (None: the built-in suites); BenchError if bad. Checks are
    validated against `rules` (bench.scorer.registry.CHECK_RULES; the scorer's `load_catalog` passes it)."""
    # The loader brings in jsonschema and yaml (~0.2 s): imported on use, because every CLI module imports this
    # package's types and `bench --help` imports every CLI module.
    from bench.catalog.model.loader import load_catalog as load

    return load(path, rules=rules)
