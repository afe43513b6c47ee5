"""Cassettes on object storage through fsspec: open, list, size, upload-and-verify (docs/scale.md).

A location is a local `Path` or a URL string with a scheme (`s3://bucket/prefix`, `gs://`, `az://`, `memory://`,
`file://`). Only URLs go through fsspec, so the base install needs neither fsspec nor a backend. Credentials and
endpoints come from each backend's usual environment and config files (and fsspec's `FSSPEC_<PROTOCOL>_<KWARG>`
variables): bench never takes, stores or prints them; errors name the URL and the kind of failure only.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from bench.core.errors import BenchError, CassetteError

# What to install for each backend's fsspec implementation (s3 is bench's extra; the others are plain packages).
INSTALL = {
    "s3": ("s3fs", "pip install 'llm-gateway-bench[s3]'"),
    "gs": ("gcsfs", "pip install gcsfs"),
    "gcs": ("gcsfs", "pip install gcsfs"),
    "az": ("adlfs", "pip install adlfs"),
    "abfs": ("adlfs", "pip install adlfs"),
}
READ_BLOCK = 1 << 20
UPLOAD_TRIES = 3

Location = Path | str


def is_url(location: object) -> bool:
    return isinstance(location, str) and "://" in location


def location(text: str) -> Location:
    """argparse type: URLs stay strings (a Path would fold `s3://` into `s3:/`), anything else is a Path."""
    return text if is_url(text) else Path(text)


def protocol(url: str) -> str:
    return url.split("://", 1)[0].lower()


def filesystem(url: str) -> Any:
    """The fsspec filesystem for `url`; one line naming the extra to install when its backend is missing."""
    proto = protocol(url)
    module, hint = INSTALL.get(proto, ("fsspec", "pip install fsspec"))
    try:
        import fsspec
    except ImportError:
        raise BenchError(f"{url}: object storage needs fsspec: {INSTALL['s3'][1]}") from None
    try:
        return fsspec.filesystem(proto)
    except ImportError:
        raise BenchError(f"{url}: {proto}:// needs the {module} package: {hint}") from None
    except ValueError:
        raise BenchError(
            f"{url}: unknown storage protocol {proto!r}; use s3://, gs://, az://, memory:// or file://"
        ) from None


def explain(url: str, exc: BaseException) -> str:
    """One line for a storage failure: what went wrong and what to do, never the credentials or a traceback."""
    return refusal(url, exc) or f"{url}: storage error ({type(exc).__name__}); check the URL and the service"


def refusal(url: str, exc: BaseException) -> str | None:
    """`explain`'s line when the service refused: no credentials, no such bucket or object, access refused. Trying
    again after a pause would fail the same way; None for a failure that may pass (a dropped connection, a throttled
    or failing service)."""
    if "Credential" in type(exc).__name__ or "credential" in str(exc).lower():
        return (
            f"{url}: no credentials for {protocol(url)}:// ; set them the backend's usual way (environment or config)"
        )
    if isinstance(exc, FileNotFoundError):
        return f"{url}: no such bucket or object; check the name (and that the bucket exists)"
    if isinstance(exc, PermissionError):
        return f"{url}: access refused by the storage service; check the credentials' permissions on it"
    return None


def open_read(url: str) -> IO[bytes]:
    fs = filesystem(url)
    try:
        handle: IO[bytes] = fs.open(url, "rb", block_size=READ_BLOCK)
    except Exception as exc:
        raise CassetteError(explain(url, exc)) from None
    return handle


class Prefetch:
    """Whole objects fetched ahead in threads while the current one is worked on: a reader of many small cassettes
    waits for a round trip per file otherwise (one GET each: the bottleneck on object storage, docs/scale.md). At
    most `depth` objects are fetched or held at once; `take` hands one over (waiting for it if it is still on its
    way) and forgets it. A fetch that failed gives None, and the reader opens the URL itself, reporting the error."""

    def __init__(self, depth: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.depth = depth
        self._pool = ThreadPoolExecutor(max_workers=max(1, depth), thread_name_prefix="bench-prefetch")
        self._held: dict[str, Any] = {}  # URL -> Future[bytes]

    def want(self, urls: Sequence[str]) -> None:
        """Start fetching these (in order) while fewer than `depth` are held or on their way."""
        for url in urls:
            if len(self._held) >= self.depth:
                return
            if url not in self._held:
                self._held[url] = self._pool.submit(_whole, url)

    def take(self, url: str) -> bytes | None:
        future = self._held.pop(url, None)
        if future is None:
            return None
        try:
            data: bytes = future.result()
        except Exception:
            return None
        return data

    def close(self) -> None:
        for future in self._held.values():
            future.cancel()
        self._held.clear()
        self._pool.shutdown(wait=True)


def _whole(url: str) -> bytes:
    data: bytes = filesystem(url).cat_file(url)
    return data


_prefetch: Prefetch | None = None


@contextlib.contextmanager
def prefetching(depth: int) -> Iterator[Prefetch | None]:
    """While open, cassettes read by URL in this process come from a Prefetch of `depth` (none when 0)."""
    global _prefetch
    if depth <= 0:
        yield None
        return
    ahead = _prefetch = Prefetch(depth)
    try:
        yield ahead
    finally:
        _prefetch = None
        ahead.close()


def prefetched(url: str) -> bytes | None:
    """The object at `url` if a Prefetch fetched it ahead, else None (read it)."""
    return _prefetch.take(url) if _prefetch is not None else None


def size(loc: Location) -> int:
    try:
        if is_url(loc):
            value: int = filesystem(str(loc)).size(str(loc))
            return value
        return Path(loc).stat().st_size
    except Exception:  # unreadable: the reader reports why; planning just does not split it
        return 0


def find_urls(url: str, suffix: str) -> list[str]:
    """The objects under a URL prefix whose names end with `suffix` (or the URL itself when it names one object),
    sorted, named as the user spelled the prefix so that results and messages carry the URL they gave."""
    fs = filesystem(url)
    try:
        fs.invalidate_cache()
        if fs.isfile(url):
            return [url]
        names = fs.find(url)
    except Exception as exc:
        raise CassetteError(explain(url, exc)) from None
    root = fs._strip_protocol(url).rstrip("/")
    found = sorted(url.rstrip("/") + n[len(root) :] for n in names if n.endswith(suffix))
    if not names and not fs.exists(url):
        raise CassetteError(f"{url}: no such bucket or prefix; pass a cassette URL or a prefix holding some")
    return found


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def sha256_remote(fs: Any, url: str) -> str:
    digest = hashlib.sha256()
    with fs.open(url, "rb", block_size=READ_BLOCK) as fh:
        while block := fh.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def join(prefix: str, name: str) -> str:
    return prefix.rstrip("/") + "/" + name


def upload(local: Path, prefix: str, *, tries: int = UPLOAD_TRIES, pause_s: float = 1.0) -> str:
    """Copy a closed cassette to `prefix`, verify the stored object's size and sha256 by reading it back, and only
    then remove the local file. A failure that may pass is retried; after the last try, or at once when the service
    refused the upload (`refusal`: a retry would fail the same way, and kept `bench record` waiting 3 s before it said
    so), the local file stays and BenchError names it. Returns the object's URL."""
    url = join(prefix, local.name)
    fs = filesystem(url)
    want_size, want_sum = local.stat().st_size, sha256_file(local)
    last = ""
    for attempt in range(tries):
        if attempt:
            time.sleep(pause_s * attempt)
        try:
            fs.put_file(str(local), url)
            fs.invalidate_cache(url)
            got_size = fs.size(url)
            if got_size != want_size:
                last = f"{url}: stored {got_size} bytes of {want_size}"
                continue
            if sha256_remote(fs, url) != want_sum:
                last = f"{url}: stored object's sha256 differs from the local file's"
                continue
        except Exception as exc:
            refused = refusal(url, exc)
            if refused is not None:
                raise BenchError(f"upload refused ({refused}); the local copy {local} is kept") from None
            last = explain(url, exc)
            continue
        local.unlink()
        return url
    raise BenchError(f"upload failed after {tries} tries ({last}); the local copy {local} is kept")
