"""The local spool of cassettes bound for object storage: what a process left there, uploaded and verified, and a
prefix's cassettes fetched for replay (docs/scale.md)."""

from __future__ import annotations

from pathlib import Path

from bench.core.cassette import SUFFIX, CassetteReader
from bench.core.errors import BenchError, CassetteError
from bench.core.storage import explain, filesystem, find_urls, join, sha256_file, sha256_remote, upload


def upload_leftovers(spool: Path, prefix: str) -> list[str]:
    """Closed cassettes a process left in the spool (stopped between closing a cassette and its verified upload),
    uploaded and verified now, before anything new is written; returns a line for each cassette it looked at.

    A cassette without an end record is left where it is (named in its line): it is still being written by another
    process using this spool, or was cut short by a crash, and is readable as it is. One whose object already
    exists is checked (size, then sha256 read back): the same bytes mean the upload had finished (the local copy is
    removed, as the upload would have); other bytes are never overwritten, and the local copy stays."""
    lines: list[str] = []
    for local in sorted(spool.glob("*.cassette")) if spool.is_dir() else []:
        try:
            reader = CassetteReader(local)
            for _ in reader:
                pass
            closed = reader.end is not None and not reader.damaged
        except (OSError, CassetteError):
            closed = False
        if not closed:
            lines.append(f"left in the spool: {local} (no end record: still being written, or cut short)")
            continue
        url = join(prefix, local.name)
        fs = filesystem(url)
        try:
            fs.invalidate_cache(url)
            stored = fs.size(url) if fs.exists(url) else None
            same = stored == local.stat().st_size and sha256_remote(fs, url) == sha256_file(local)
        except Exception as exc:
            raise BenchError(explain(url, exc)) from None
        if same:
            local.unlink()
            lines.append(f"{url} was already uploaded whole (size and sha256 verified), removed the local copy {local}")
        elif stored is not None:
            lines.append(f"{url} exists with other bytes: not overwritten; the local copy {local} is kept")
        else:
            lines.append(f"uploaded {upload(local, prefix)} left in the spool (size and sha256 verified)")
    return lines


def fetch_all(prefix: str, folder: Path) -> list[Path]:
    """Copy every cassette under `prefix` into `folder` (for replay, which serves from local files); an existing
    file of the same name is kept, never overwritten."""
    folder.mkdir(parents=True, exist_ok=True)
    fs = filesystem(prefix)
    got: list[Path] = []
    for url in find_urls(prefix, SUFFIX):
        target = folder / str(url).rsplit("/", 1)[-1]
        if not target.exists():
            tmp = target.with_name(f".{target.name}.part")
            try:
                fs.get_file(str(url), str(tmp))
            except Exception as exc:
                tmp.unlink(missing_ok=True)
                raise BenchError(explain(str(url), exc)) from None
            tmp.replace(target)
        got.append(target)
    return got
