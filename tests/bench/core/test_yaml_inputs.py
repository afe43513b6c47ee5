"""Every YAML file bench reads (a rules file, a price table, bench.yaml, a catalog folder) is untrusted: bytes that are
not UTF-8 and files past the size bound are one line naming the file and the fix, never a traceback, and a file
past the bound is refused before it is parsed (a 31 MB file took past 60 s and 1.1 GB)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.catalog.driver.config import load_config_file
from bench.core.errors import BenchError
from bench.core.yamlfile import MAX_YAML_BYTES
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.report.cost import load_prices
from bench.scorer.rules import load_rules


def _catalog(path: Path) -> Any:
    folder = path.parent / "suites"
    folder.mkdir(exist_ok=True)
    path.rename(folder / "suite.yaml")
    return load_catalog(folder)


LOADERS: dict[str, Callable[[Path], Any]] = {
    "rules": load_rules,
    "prices": load_prices,
    "config": load_config_file,
    "catalog": _catalog,
}


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_bytes_that_are_not_utf8_are_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "in.yaml"
    path.write_bytes(b"rules:\n  - id: caf\xe9\n")  # Latin-1, as an editor may save it
    with pytest.raises(BenchError) as caught:
        LOADERS[kind](path)
    message = str(caught.value)
    at = len(b"rules:\n  - id: caf")  # the offset of the Latin-1 byte
    assert "not UTF-8" in message and f"byte {at}" in message and "\n" not in message


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_a_file_past_the_size_bound_is_refused_unparsed(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "in.yaml"
    line = b"- [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z]\n"
    path.write_bytes(b"rules:\n" + line * (31_000_000 // len(line)))  # 31 MB of small scalars
    with pytest.raises(BenchError) as caught:
        LOADERS[kind](path)
    assert f"larger than {MAX_YAML_BYTES >> 20} MiB" in str(caught.value) and "\n" not in str(caught.value)
