"""The test catalog: its data (`data/`: YAML suites, fixtures, schema, built-in tools, configs), its model and loader
(`bench.catalog.model`), the recording driver (`bench.catalog.driver`), the simulator (`bench.catalog.sim`) and their
CLI modules.

Every path into the catalog's data is named here, once. This package's import must stay light: the scorer imports
`bench.catalog.model`, and the scorer must never pull in aiohttp.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.errors import BenchError

DATA_DIR = Path(__file__).resolve().parent / "data"
SUITES_DIR = DATA_DIR / "suites"
FIXTURES_DIR = DATA_DIR / "fixtures"
SCHEMA_FILE = DATA_DIR / "schema" / "test.schema.json"
TOOLS_DIR = DATA_DIR / "tools"


def fixture_dir(fixture: str) -> Path:
    """A workspace's fixture directory: an absolute path as given, else the built-in data/fixtures/<name>."""
    candidate = Path(fixture)
    path = candidate if candidate.is_absolute() else FIXTURES_DIR / fixture
    if not path.is_dir():
        raise BenchError(f"unknown fixture {fixture!r}: no directory {path}; add it under catalog/data/fixtures/")
    return path
