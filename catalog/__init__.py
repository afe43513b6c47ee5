"""The test catalog (YAML suites, fixtures, schema) and the recording driver.

This package's import must stay light: the scorer and bench.tools locate catalog data through it
(`Path(catalog.__file__).parent`), and the scorer must never pull in aiohttp.
"""

from __future__ import annotations

from pathlib import Path

CATALOG_DIR = Path(__file__).resolve().parent
SUITES_DIR = CATALOG_DIR / "suites"
FIXTURES_DIR = CATALOG_DIR / "fixtures"
SCHEMA_DIR = CATALOG_DIR / "schema"
TOOLS_DIR = CATALOG_DIR / "tools"
