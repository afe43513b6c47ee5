"""Find and read the scores behind a report: a scores file, or a folder (its scores file, whatever bench named it,
else its cassettes)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import BenchError
from bench.core.storage import Location, is_url
from bench.scorer.results import Meta, Result, TrafficLine

SCORES_NAME = "scores.jsonl"


@dataclass
class Scores:
    """One scores file's content and where it came from (cassette paths in it are relative to `base`)."""

    source: str
    base: Path
    meta: Meta
    results: list[Result]
    traffic: list[TrafficLine] = field(default_factory=list)  # one line per exchange (bench.scorer.traffic_lines)
    # For a scores file read from object storage: the URL prefix its cassette paths are relative to.
    remote_base: str | None = None


def scores_file(path: Location) -> Path | None:
    """The scores file `load(path)` reads, or None when it rescores cassettes (a cassette, a folder of
    them without a scores file, an object-storage URL). For readers that stream the file themselves."""
    if is_url(path):
        return None
    path = Path(path)
    if not path.exists():
        raise BenchError(f"{path}: no such file or folder; give a scores file or a folder of cassettes")
    if path.is_dir():
        return folder_scores(path)
    return None if path.suffix == ".cassette" else path


def folder_scores(folder: Path) -> Path | None:
    """The scores file of a folder, whatever bench named it: scores.jsonl (`bench rescore`'s default), else a
    `*.jsonl` in it whose first line is a scores file's meta line (`bench demo`'s rec-*.scores.jsonl, a `--out`);
    of several, the newest, said in one line. None: there is none, the cassettes are rescored."""
    default = folder / SCORES_NAME
    if default.is_file():
        return default
    found = sorted((p for p in folder.glob("*.jsonl") if _is_scores(p)), key=lambda p: (p.stat().st_mtime, p.name))
    if len(found) > 1:
        others = ", ".join(p.name for p in found[:-1])
        print(
            f"bench: {folder} holds {len(found)} scores files; reading the newest, {found[-1].name} (not {others}): "
            "name a file to read another, or rescore the folder into one",
            file=sys.stderr,
        )
    return found[-1] if found else None


def _is_scores(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 16)
    except OSError:
        return False
    return b'"kind":"meta"' in first and b'"format":"bench-scores"' in first


def load(path: Location, *, jobs: int = 1) -> Scores:
    """Read PATH: a scores file, a folder holding scores.jsonl, a folder of cassettes to rescore, or
    cassettes on object storage (a URL to one or to a prefix, docs/scale.md), also rescored; a scores
    file on object storage (its URL, or the prefix holding scores.jsonl) is fetched and read as a local one."""
    if is_url(path):
        return _from_url(str(path), jobs)
    found = scores_file(path)
    if found is not None:
        return _from_file(found)
    path = Path(path)
    if path.is_dir():
        cassettes = sorted(path.rglob("*.cassette"))
        if not cassettes:
            raise BenchError(f"{path}: no scores file and no *.cassette files in it; record a run or run bench rescore")
        return _rescored(cassettes, jobs, f"{path} (rescored)", path)
    return _rescored([path], jobs, f"{path} (rescored)", path.parent)  # a cassette


def _from_url(url: str, jobs: int) -> Scores:
    with _fetched(url) as found:
        if found is not None:
            scores_url, local = found
            scores = _from_file(local)
            scores.source, scores.base, scores.remote_base = scores_url, Path.cwd(), scores_url.rsplit("/", 1)[0]
            return scores
    # Results name these cassettes by their URLs; the base only resolves relative names.
    return _rescored([url], jobs, f"{url} (rescored)", Path.cwd())


@contextmanager
def _fetched(url: str) -> Iterator[tuple[str, Path] | None]:
    """The scores file at URL (or in the prefix URL) fetched to a temporary local copy while the context is open:
    (its URL, the copy); None when there is none, so that the cassettes under the prefix are to be rescored."""
    import tempfile

    from bench.core import storage

    fs = storage.filesystem(url)
    scores_url = url if url.endswith(".jsonl") else storage.join(url, SCORES_NAME)
    try:
        fs.invalidate_cache()
        found = fs.isfile(scores_url)
    except Exception as exc:
        raise BenchError(storage.explain(url, exc)) from None
    if not found:
        if url.endswith(".jsonl"):
            raise BenchError(f"{url}: no such scores file; check the URL, or give the prefix of the cassettes")
        yield None
        return
    # Read from a local copy: one GET, then the same line-at-a-time reader as a local file.
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        local = Path(tmp) / SCORES_NAME
        try:
            fs.get_file(scores_url, str(local))
        except Exception as exc:
            raise BenchError(storage.explain(scores_url, exc)) from None
        yield scores_url, local


@dataclass
class Stream:
    """A scores file being read: its meta line, and its result and traffic lines one at a time, in the file's
    order, for a reader that aggregates as it reads (one pass, memory bounded by what it keeps)."""

    source: str
    base: Path
    meta: Meta
    lines: Iterator[Result | TrafficLine]
    remote_base: str | None = None


@contextmanager
def stream(path: Location, *, jobs: int = 1) -> Iterator[Stream]:
    """`load(path)` as one pass over the scores file while the context is open; cassettes rescored (no
    scores file to read) are streamed from the results held."""
    from bench.scorer.scores_io import open_scores

    if is_url(path):
        with _fetched(str(path)) as found:
            if found is not None:
                scores_url, local = found
                meta, lines = open_scores(local)
                try:
                    yield Stream(scores_url, Path.cwd(), meta, _bare(lines), scores_url.rsplit("/", 1)[0])
                finally:
                    lines.close()  # type: ignore[attr-defined]
                return
    else:
        file = scores_file(path)
        if file is not None:
            meta, lines = open_scores(file)
            try:
                yield Stream(str(file), file.parent, meta, _bare(lines))
            finally:
                lines.close()  # type: ignore[attr-defined]
            return
    scores = load(path, jobs=jobs)
    yield Stream(scores.source, scores.base, scores.meta, iter([*scores.results, *scores.traffic]), scores.remote_base)


@contextmanager
def local_scores(path: Location, *, jobs: int = 1) -> Iterator[tuple[Path, Path]]:
    """The scores file behind PATH as a local file, for readers that pass over it more than once: (the file, the folder
    its cassette names are relative to). Cassettes with no scores file are rescored into a temporary one, a scores
    file on object storage is fetched, both removed when the context ends."""
    import tempfile

    from bench.scorer.rescore import Request, default_base, rescore

    if is_url(path):
        with _fetched(str(path)) as found:
            if found is not None:
                yield found[1], Path.cwd()
                return
    else:
        file = scores_file(path)
        if file is not None:
            yield file, file.parent
            return
    base = Path.cwd() if is_url(path) else (Path(path) if Path(path).is_dir() else Path(path).parent)
    with tempfile.TemporaryDirectory(prefix="bench-rescore-") as tmp:
        out = Path(tmp) / SCORES_NAME
        rescore(Request([path], jobs=jobs), out, base=default_base([path]))
        yield out, base


def _bare(lines: Iterator[tuple[int, Result | TrafficLine]]) -> Iterator[Result | TrafficLine]:
    for _, line in lines:
        yield line


def _rescored(paths: Sequence[Location], jobs: int, source: str, base: Path) -> Scores:
    """Cassettes with no scores file, rescored into a temporary one and read back (the one rescore path): the
    results name their cassettes relative to `base`, the very folder the Scores resolves them from (a folder's
    subfolders kept: the pytest plugin's <module>/<test>.cassette)."""
    import tempfile

    # Imported lazily: rescoring pulls in the catalog and every evaluator, which a report on a scores file never needs.
    from bench.scorer.rescore import Request, rescore

    with tempfile.TemporaryDirectory(prefix="bench-rescore-") as tmp:
        out = Path(tmp) / SCORES_NAME
        rescore(Request(paths, jobs=jobs), out, base=base)
        scores = _from_file(out)
    scores.source, scores.base = source, base
    return scores


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic containers.

    A scores file parses into millions of small dicts and lists; the collector, triggered again and again while they
    are created, rescans every live container each time (reading 100k results was ~4x slower, and aggregating them
    ~2x). Nothing built here forms a reference cycle, so reference counting frees it all the same.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _from_file(path: Path) -> Scores:
    from bench.scorer.scores_io import read_scores

    traffic: list[TrafficLine] = []
    with paused_gc():
        meta, results = read_scores(path, traffic=traffic)
    return Scores(source=str(path), base=path.parent, meta=meta, results=results, traffic=traffic)
