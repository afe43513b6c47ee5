"""Reading and writing the scores file (docs/scores-format.md): JSON Lines, sorted keys, compact, deterministic."""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from bench.errors import BenchError

FORMAT_NAME = "bench-scores"
FORMAT_VERSION = 1


def dumps(obj: Mapping[str, Any]) -> bytes:
    return orjson.dumps(obj, default=_plain, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) + b"\n"


def _plain(value: Any) -> Any:
    """JSON for the compact containers results hold in memory (scorer.scoring keeps ITLs as arrays)."""
    if isinstance(value, array):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to a scores file")


def write_scores(path: Path, meta: Mapping[str, Any], results: Iterable[Mapping[str, Any]]) -> None:
    """Write atomically (temporary file, then rename) so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(dumps(meta))
            for result in results:
                fh.write(dumps(result))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"cannot write scores file {path}: {exc.strerror}; choose another --out") from None


def read_scores(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = Path(path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise BenchError(f"cannot read scores file {path}: {exc.strerror}; run `bench rescore` first") from None
    if not lines:
        raise BenchError(f"{path}: empty scores file; run `bench rescore` again")
    try:
        meta = orjson.loads(lines[0])
        results = [orjson.loads(line) for line in lines[1:] if line.strip()]
    except orjson.JSONDecodeError as exc:
        raise BenchError(f"{path}: not a scores file (bad JSON: {exc}); run `bench rescore` again") from None
    if not isinstance(meta, dict) or meta.get("kind") != "meta" or meta.get("format") != FORMAT_NAME:
        raise BenchError(f"{path}: not a bench scores file (no meta line); pass a file `bench rescore` wrote")
    version = meta.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise BenchError(f"{path}: scores format version {version!r} is newer than this bench reads; upgrade bench")
    return meta, [r for r in results if isinstance(r, dict) and r.get("kind") == "result"]
