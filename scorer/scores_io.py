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


def write_scores(
    path: Path,
    meta: Mapping[str, Any],
    results: Iterable[Mapping[str, Any]],
    traffic: Iterable[Mapping[str, Any]] = (),
) -> None:
    """Write atomically (temporary file, then rename) so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(dumps(meta))
            for result in results:
                fh.write(dumps(result))
            for entry in traffic:
                fh.write(dumps(entry))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"cannot write scores file {path}: {exc.strerror}; choose another --out") from None


def read_scores(
    path: Path, *, exchanges: bool = True, traffic: list[dict[str, Any]] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The meta line and the result lines, read a line at a time. `exchanges=False` drops each result's per-exchange
    details (timings, ITLs: most of a file) as it is read, for callers that compare scores only. `traffic`, when
    given, receives the traffic lines (one per exchange); otherwise they are skipped."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            meta = _parse(path, fh.readline())
            if not meta:
                raise BenchError(f"{path}: empty scores file; run `bench rescore` again")
            if not isinstance(meta, dict) or meta.get("kind") != "meta" or meta.get("format") != FORMAT_NAME:
                raise BenchError(f"{path}: not a bench scores file (no meta line); pass a file `bench rescore` wrote")
            version = meta.get("version")
            if not isinstance(version, int) or version > FORMAT_VERSION:
                raise BenchError(
                    f"{path}: scores format version {version!r} is newer than this bench reads; upgrade bench"
                )
            results: list[dict[str, Any]] = []
            for line in fh:
                result = _parse(path, line)
                if isinstance(result, dict) and result.get("kind") == "result":
                    if not exchanges:
                        result.pop("exchanges", None)
                    results.append(result)
                elif traffic is not None and isinstance(result, dict) and result.get("kind") == "traffic":
                    traffic.append(result)
    except OSError as exc:
        raise BenchError(f"cannot read scores file {path}: {exc.strerror}; run `bench rescore` first") from None
    return meta, results


def _parse(path: Path, line: bytes) -> Any:
    if not line.strip():
        return None
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise BenchError(f"{path}: not a scores file (bad JSON: {exc}); run `bench rescore` again") from None
