"""The local spool of cassettes bound for object storage: bench's own folder a cassette is written to before its
upload, what a process left there (uploaded and verified), and a prefix's cassettes fetched for replay
(docs/scale.md).

The spool is bench's own: one folder per destination URL, `<root>/<slug>-<hash>`, under bench's cache folder
(`$XDG_CACHE_HOME/bench/spool`, else `~/.cache/bench/spool`) or under the `--spool DIR` the user gives. bench marks it
with a `.bench-spool` file holding the URL when it creates it. Uploading leftovers reads only a folder so marked for
that very URL, so no file bench did not write for that URL (a user's ./cassettes, another prefix's spool) is ever
uploaded or removed, whatever folder `--spool` names.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from bench.core.cassette import SUFFIX, CassetteReader
from bench.core.errors import BenchError, CassetteError
from bench.core.storage import explain, filesystem, find_urls, join, sha256_file, sha256_remote, upload

MARKER = ".bench-spool"


def default_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "bench" / "spool"


def _key(url: str) -> str:
    url = url.rstrip("/")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", url).strip("-")[:60]
    return f"{slug}-{hashlib.sha256(url.encode()).hexdigest()[:10]}"


def marked_for(folder: Path, url: str) -> bool:
    """Whether `folder` is the spool bench made for `url` (its marker names that URL)."""
    try:
        return (folder / MARKER).read_text(encoding="utf-8").strip() == url.rstrip("/")
    except OSError:
        return False


def spool_folder(url: str, root: Path | None = None) -> Path:
    """The spool for `url` under `root` (default: bench's cache), created and marked on first use. A folder of
    that name bench did not mark for this URL is refused, never written into."""
    folder = (root if root is not None else default_root()) / _key(url)
    if folder.is_dir() and marked_for(folder, url):
        return folder
    if folder.exists() and any(folder.iterdir()):
        raise BenchError(f"{folder} exists but is not bench's spool for {url}; move it away or give another --spool")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{MARKER}.{os.getpid()}"
        tmp.write_text(url.rstrip("/") + "\n", encoding="utf-8")
        tmp.replace(folder / MARKER)
    except OSError as exc:
        raise BenchError(f"cannot create the spool {folder}: {exc.strerror}; give a writable --spool DIR") from None
    return folder


def upload_leftovers(spool: Path, prefix: str) -> list[str]:
    """Closed cassettes a process left in the spool (stopped between closing a cassette and its verified upload),
    uploaded and verified now, before anything new is written; returns a line for each cassette it looked at.

    A cassette without an end record is left where it is (named in its line): it is still being written by another
    process using this spool, or was cut short by a crash, and is readable as it is. One whose object already
    exists is checked (size, then sha256 read back): the same bytes mean the upload had finished (the local copy is
    removed, as the upload would have); other bytes are never overwritten, and the local copy stays.

    Only a folder bench made and marked as the spool of this very `prefix` is read (spool_folder): any other folder,
    a user's cassettes among them, gives no leftovers, and nothing in it is uploaded or removed."""
    lines: list[str] = []
    if not marked_for(spool, prefix):
        return lines
    for local in sorted(spool.glob("*.cassette")):
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
