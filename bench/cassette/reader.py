"""Streaming cassette reader: bounded memory, tolerant of files cut short.

A file cut by kill -9 ends inside the zstd frame (no end record): every record in a flushed block is returned, and
`truncated` is set. A foreign file, an unknown version or a damaged header raise CassetteError with one line that
names the file; damage after the header stops the iteration there, sets `truncated` and `error`, and keeps what came
before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import zstandard

from bench.cassette.format import END, EXCHANGE, FORMAT_NAME, FORMAT_VERSION, HEADER, SUFFIX, ZSTD_MAGIC
from bench.cassette.migrate import upgrade
from bench.errors import CassetteError

READ_SIZE = 1 << 20
OUT_SIZE = 1 << 20

Record = dict[str, Any]


class CassetteReader:
    """Iterate a cassette's exchange records. `header` is read on open; `end`, `truncated`, `error` after iterating."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.end: Record | None = None
        self.truncated = False
        self.error: str | None = None
        self.raw_size = 0
        self._records = self._iter_records()
        try:
            first = next(self._records)
        except StopIteration:
            raise CassetteError(f"{self.path}: empty or cut before its header; it holds no exchanges") from None
        if not isinstance(first, dict) or first.get("kind") != HEADER or first.get("format") != FORMAT_NAME:
            raise CassetteError(f"{self.path}: not a bench cassette (no cassette header); pass a file bench wrote")
        version = first.get("version")
        if not isinstance(version, int) or version < 1:
            raise CassetteError(f"{self.path}: bad format version {version!r}; the file is damaged")
        if version > FORMAT_VERSION:
            raise CassetteError(
                f"{self.path}: format version {version} is newer than this bench reads ({FORMAT_VERSION}); "
                "upgrade bench"
            )
        self.version: int = version
        self.header: Record = upgrade(first, version)

    def __iter__(self) -> Iterator[Record]:
        for record in self._records:
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind == EXCHANGE:
                yield upgrade(record, self.version)
            elif kind == END:
                self.end = record
            # Unknown kinds are skipped: newer minor additions must not break older readers.
        if self.end is None and self.error is None:
            self.truncated = True
            self.error = "no end record (the recorder was killed or is still writing)"

    def _iter_records(self) -> Iterator[Any]:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed in the finally below, across yields
        except OSError as exc:
            raise CassetteError(f"{self.path}: cannot open: {exc.strerror}") from None
        try:
            magic = f.read(4)
            if magic != ZSTD_MAGIC:
                raise CassetteError(
                    f"{self.path}: not a bench cassette (not zstd-compressed); pass a {SUFFIX} file bench wrote"
                )
            f.seek(0)
            unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
            # Decompressed a bounded piece at a time: one call for a whole block would allocate its full output at
            # once (a 1 MiB block of a 20x-compressed file is 20 MiB, of highly repetitive traffic far more), and
            # touching that fresh memory costs more than decompressing it. Appended sessions are frames in a row.
            stream = zstandard.ZstdDecompressor().stream_reader(f, read_size=READ_SIZE, read_across_frames=True)
            while True:
                try:
                    data = stream.read(OUT_SIZE)
                except zstandard.ZstdError as exc:
                    self._damaged(f"damaged zstd data: {exc}")
                    yield from self._drain(unpacker)
                    return
                if not data:
                    break
                self.raw_size += len(data)
                unpacker.feed(data)
                yield from self._drain(unpacker)
                if self.error is not None:
                    return
            if unpacker.tell() < self.raw_size:
                self._damaged("cut inside a record")
        finally:
            f.close()

    def _drain(self, unpacker: msgpack.Unpacker) -> Iterator[Any]:
        try:
            yield from unpacker
        except (msgpack.UnpackException, ValueError) as exc:
            self._damaged(f"damaged record: {exc}")

    def _damaged(self, why: str) -> None:
        self.truncated = True
        self.error = why


def read_cassette(path: Path | str) -> tuple[Record, list[Record]]:
    """Convenience: the header and all exchanges (small files, tests)."""
    reader = CassetteReader(path)
    return reader.header, list(reader)


def find_cassettes(paths: list[Path] | list[str]) -> list[Path]:
    """Every cassette under the given files or folders, sorted, so that runs are deterministic."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(sorted(p.rglob(f"*{SUFFIX}")))
        elif p.exists():
            found.append(p)
        else:
            raise CassetteError(f"{p}: no such file or directory; pass a cassette file or a folder of them")
    return found
