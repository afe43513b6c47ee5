"""Find and read the scores behind a report: a scores file, or a folder (its scores.jsonl, else rescored in memory)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.errors import BenchError
from scorer.scores_io import FORMAT_NAME, FORMAT_VERSION

SCORES_NAME = "scores.jsonl"


@dataclass
class Scores:
    """One scores file's content and where it came from (cassette paths in it are relative to `base`)."""

    source: str
    base: Path
    meta: dict[str, Any]
    results: list[dict[str, Any]]


def load(path: Path, *, jobs: int = 1) -> Scores:
    """Read PATH: a scores file, a folder holding scores.jsonl, or a folder of cassettes to rescore in memory."""
    if not path.exists():
        raise BenchError(f"{path}: no such file or folder; give a scores file or a folder of cassettes")
    if path.is_dir():
        scores_file = path / SCORES_NAME
        if scores_file.is_file():
            return _from_file(scores_file)
        cassettes = sorted(path.rglob("*.cassette"))
        if not cassettes:
            raise BenchError(
                f"{path}: no {SCORES_NAME} and no *.cassette files in it; record a run or run bench rescore"
            )
        meta, results = _rescore(cassettes, jobs)
        return Scores(source=f"{path} (rescored in memory)", base=path, meta=meta, results=results)
    if path.suffix == ".cassette":
        meta, results = _rescore([path], jobs)
        return Scores(source=f"{path} (rescored in memory)", base=path.parent, meta=meta, results=results)
    return _from_file(path)


def _rescore(paths: list[Path], jobs: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    # Imported lazily: rescoring pulls in the catalog and every evaluator, which a report on a scores file never needs.
    try:
        pipeline = importlib.import_module("scorer.pipeline")
    except ModuleNotFoundError as exc:
        raise BenchError("this bench has no scorer pipeline; give a scores file written by bench rescore") from exc
    meta, results = pipeline.rescore(paths, jobs=jobs)
    return meta, list(results)


def _from_file(path: Path) -> Scores:
    meta, results = read_scores_file(path)
    return Scores(source=str(path), base=path.parent, meta=meta, results=results)


# Inter-token gaps are ~90% of a scores file's numbers (50-300 per exchange). Cut out of each line and converted to
# numpy in large batches they cost ~3x less than as lists inside each parsed line, and are held in one array.
# The key cannot occur inside a JSON string (its quotes would be escaped), so cutting the bytes is safe; a file
# written without compact separators simply keeps its lists.
_GAPS_KEY = b'"itl_us":['
_BATCH = 5000


def _cut_gaps(line: bytes, segments: list[bytes]) -> bytes:
    start = line.find(_GAPS_KEY)
    if start < 0:
        return line
    parts, pos = [], 0
    while start >= 0:
        first = start + len(_GAPS_KEY)
        close = line.find(b"]", first)
        if close < 0:
            break
        parts += [line[pos:start], b'"itl_us":%d' % len(segments)]
        segments.append(line[first:close])
        pos = close + 1
        start = line.find(_GAPS_KEY, pos)
    parts.append(line[pos:])
    return b"".join(parts)


def read_scores_file(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Parse a scores file (docs/scores-format.md); ITL lists come back as numpy arrays of microseconds."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BenchError(f"{path}: cannot read ({exc.strerror}); check the path and its permissions") from exc
    lines = raw.splitlines()
    del raw
    meta = _meta(path, lines[0] if lines else b"")
    segments: list[bytes] = []
    results: list[dict[str, Any]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = orjson.loads(_cut_gaps(line, segments))
        except orjson.JSONDecodeError as exc:
            raise BenchError(
                f"{path}:{number}: not valid JSON ({exc}); write the file again with bench rescore"
            ) from exc
        if isinstance(record, dict) and record.get("kind") == "result":
            results.append(record)
    del lines
    _attach_gaps(path, results, segments)
    return meta, results


def _meta(path: Path, line: bytes) -> dict[str, Any]:
    try:
        meta = orjson.loads(line)
    except orjson.JSONDecodeError:
        meta = None
    if not isinstance(meta, dict) or meta.get("kind") != "meta" or meta.get("format") != FORMAT_NAME:
        raise BenchError(f"{path}: not a bench scores file (no meta line); pass a file bench rescore wrote")
    version = meta.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise BenchError(f"{path}: scores format version {version!r} is newer than this bench reads; upgrade bench")
    return meta


def _attach_gaps(path: Path, results: list[dict[str, Any]], segments: list[bytes]) -> None:
    if not segments:
        return
    sizes = np.fromiter((seg.count(b",") + 1 if seg.strip() else 0 for seg in segments), dtype=np.int64)
    try:
        batches = [
            np.asarray(orjson.loads(b"[" + b",".join(seg for seg in segments[i : i + _BATCH] if seg.strip()) + b"]"))
            for i in range(0, len(segments), _BATCH)
        ]
        values = np.concatenate(batches).astype(np.float64, copy=False)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        values = np.empty(0)
    if values.size != int(sizes.sum()):
        raise BenchError(
            f"{path}: an itl_us list holds something other than numbers; write it again with bench rescore"
        )
    ends = np.cumsum(sizes)
    starts = ends - sizes
    for result in results:
        for ex in result.get("exchanges") or ():
            index = ex.get("itl_us")
            if isinstance(index, int) and not isinstance(index, bool):
                ex["itl_us"] = values[starts[index] : ends[index]]
