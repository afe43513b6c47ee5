"""Where the catalog package's data (suites, fixtures, schema, tools) lies on disk."""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from bench.errors import BenchError


@cache
def catalog_dir() -> Path:
    """The `catalog` package directory, found through its import (works installed, editable or from a checkout).

    An editable install made before catalog/__init__.py existed imports `catalog` as a namespace package, with no
    `__file__`: its first search path entry is then the directory.
    """
    module = importlib.import_module("catalog")
    if module.__file__:
        return Path(module.__file__).resolve().parent
    for entry in getattr(module, "__path__", []):
        path = Path(entry)
        if (path / "suites").is_dir():
            return path.resolve()
    raise BenchError("cannot locate the catalog package's data; reinstall bench (pip install -e .)")
