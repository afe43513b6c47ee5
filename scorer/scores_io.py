"""Reading and writing the scores file (docs/scores-format.md): JSON Lines, sorted keys, compact, deterministic.

Lines are the structs of bench.scorer.results, encoded by msgspec with sorted keys and decoded straight into them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

import msgspec

from bench.core.errors import BenchError
from bench.scorer.results import (
    ENCODER,
    FORMAT_NAME,
    FORMAT_VERSION,
    META_DECODER,
    RESULT_DECODER,
    TRAFFIC_DECODER,
    Meta,
    Result,
    TrafficLine,
)

T = TypeVar("T")
# Lines are written one at a time (results of ~3 KB, most of it their exchanges' gaps): a 1 MiB buffer writes them
# in large blocks, where the default 8 KiB one made a system call every two or three lines (2-3 us a line).
WRITE_BUFFER = 1 << 20

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "WRITE_BUFFER",
    "dumps",
    "open_scores",
    "read_result_at",
    "read_scores",
    "scores_reader",
    "write_lines",
    "write_scores",
]


def dumps(line: Meta | Result | TrafficLine) -> bytes:
    return ENCODER.encode(line) + b"\n"


def write_scores(path: Path, meta: Meta, results: Iterable[Result], traffic: Iterable[TrafficLine] = ()) -> None:
    """Write atomically (temporary file, then rename) so a reader never sees half a file."""
    write_lines(path, itertools.chain([dumps(meta)], map(dumps, results), map(dumps, traffic)))


def write_lines(path: Path, lines: Iterable[bytes]) -> None:
    """Encoded lines (the meta line first) written atomically, as write_scores writes them."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb", buffering=WRITE_BUFFER) as fh:
            for line in lines:
                fh.write(line)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"cannot write scores file {path}: {exc.strerror}; choose another --out") from None


def read_scores(
    path: Path, *, exchanges: bool = True, traffic: list[TrafficLine] | None = None
) -> tuple[Meta, list[Result]]:
    """The meta line and the result lines, read a line at a time. `exchanges=False` drops each result's per-exchange
    details (timings, ITLs: most of a file) as it is read, for callers that compare scores only. `traffic`, when
    given, receives the traffic lines (one per exchange); otherwise they are skipped, as are lines of other kinds. A
    line that is not valid JSON, or whose fields have other types than the format's, is named in a one-line error."""
    meta, lines = open_scores(path)
    results: list[Result] = []
    for _, line in lines:
        if isinstance(line, Result):
            if not exchanges:
                line.exchanges = []
            results.append(line)
        elif traffic is not None:
            traffic.append(line)
    return meta, results


def open_scores(path: Path) -> tuple[Meta, Iterator[tuple[int, Result | TrafficLine]]]:
    """The meta line (checked), and the lines after it as they are read: (byte offset of the line, its result or
    its traffic map); lines of other kinds are skipped. For readers that keep only part of each result and read the
    rest again when needed (`read_result_at`)."""
    path = Path(path)
    try:
        fh = open(path, "rb")  # noqa: SIM115 (the generator below owns it and closes it)
        first = fh.readline()
    except OSError as exc:
        raise BenchError(f"cannot read scores file {path}: {exc.strerror}; run `bench rescore` first") from None
    try:
        if not first.strip():
            raise BenchError(f"{path}: empty scores file; run `bench rescore` again")
        head = _parse(path, first)
        if not isinstance(head, dict) or head.get("kind") != "meta" or head.get("format") != FORMAT_NAME:
            raise BenchError(f"{path}: not a bench scores file (no meta line); pass a file `bench rescore` wrote")
        version = head.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise BenchError(f"{path}: scores format version {version!r} is newer than this bench reads; upgrade bench")
        meta = _decode(path, 1, first, META_DECODER)
    except BaseException:
        fh.close()
        raise
    return meta, _lines(path, fh, len(first))


def _lines(path: Path, fh: BinaryIO, offset: int) -> Iterator[tuple[int, Result | TrafficLine]]:
    with fh:
        try:
            for number, line in enumerate(fh, start=2):
                at = offset
                offset += len(line)
                if not line.strip():
                    continue
                kind = _kind(path, line)
                if kind == "result":
                    yield at, _decode(path, number, line, RESULT_DECODER)
                elif kind == "traffic":
                    yield at, _decode(path, number, line, TRAFFIC_DECODER)
        except OSError as exc:
            raise BenchError(f"cannot read scores file {path}: {exc.strerror}; run `bench rescore` first") from None


def read_result_at(path: Path, offset: int) -> Result | None:
    """The result on the line at `offset` (from `open_scores`), or None when no result is there (the file changed
    since); one line naming the file when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            line = fh.readline()
    except OSError as exc:
        raise BenchError(f"cannot read scores file {path}: {exc.strerror}") from None
    try:
        return RESULT_DECODER.decode(line)
    except msgspec.DecodeError:  # ValidationError included
        return None


def _kind(path: Path, line: bytes) -> object:
    """A line's kind: found in its bytes as bench writes them, else read from its JSON (lines of other kinds are
    skipped by the readers)."""
    if b'"kind":"result"' in line:
        return "result"
    if b'"kind":"traffic"' in line:
        return "traffic"
    other = _parse(path, line)
    return other.get("kind") if isinstance(other, dict) else None


def _parse(path: Path, line: bytes) -> object:
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise BenchError(f"{path}: not a scores file (bad JSON: {exc}); run `bench rescore` again") from None


def _decode(path: Path, number: int, line: bytes, decoder: msgspec.json.Decoder[T]) -> T:
    try:
        return decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise BenchError(f"{path}: line {number} is damaged ({exc}); run `bench rescore` again") from None
    except msgspec.DecodeError as exc:
        raise BenchError(f"{path}: not a scores file (bad JSON: {exc}); run `bench rescore` again") from None


@contextlib.contextmanager
def scores_reader(
    path: Path, *, exchanges: bool = True, traffic: list[TrafficLine] | None = None
) -> Iterator[tuple[Meta, Iterator[Result]]]:
    """read_scores as a stream: the meta line, read (and checked) at once, and the result lines as they are read,
    one at a time, while the context is open (the file is closed when it ends)."""
    meta, lines = open_scores(path)
    try:
        yield meta, _results(lines, exchanges, traffic)
    finally:
        lines.close()  # type: ignore[attr-defined]


def _results(
    lines: Iterator[tuple[int, Result | TrafficLine]], exchanges: bool, traffic: list[TrafficLine] | None
) -> Iterator[Result]:
    for _, line in lines:
        if isinstance(line, Result):
            if not exchanges:
                line.exchanges = []
            yield line
        elif traffic is not None:
            traffic.append(line)
