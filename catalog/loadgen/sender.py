"""Sending one work item through the proxy, with the level's tags, and what the generator itself saw of it.

A request is read to its end (a stream's reads are counted, not parsed: the cassette keeps every byte, and the
report times it offline); a catalog job runs its conversation as `bench record` would, its answers parsed to follow
its turns, with no retries (under load a retry would be one more arrival nobody scheduled).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp

from bench.catalog.driver.conversation import Job, Sender, run_job
from bench.catalog.loadgen.work import CatalogJob, LoadRequest, Work

# Recorded request headers never resent: the connection's own, the body's length, credentials (the proxy adds the
# upstream's key; recorded ones are redacted anyway), and the recording's own tags (the load run writes its own).
NOT_RESENT = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "authorization",
        "api-key",
        "x-api-key",
        "cookie",
        "proxy-authorization",
    }
)


def resendable(headers: list[list[str]] | tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The recorded headers a replay sends again (X-Bench-* tags of the recording are the load run's own now)."""
    out: list[tuple[str, str]] = []
    for pair in headers:
        if len(pair) != 2:
            continue
        name, value = str(pair[0]), str(pair[1])
        low = name.lower()
        if low in NOT_RESENT or low.startswith("x-bench-") or "[REDACTED]" in value:
            continue
        out.append((name, value))
    return tuple(out)


@dataclass
class Sent:
    """One work item as the generator saw it (its own clock; the cassette has the proxy's)."""

    phase: str
    start: float  # monotonic seconds when it was sent
    late_s: float | None = None  # scheduled arrivals: how much after its due time it was sent
    end: float = 0.0
    ok: bool = False
    error: str | None = None
    requests: int = 1
    reads: int = 0  # the response body's reads (a stream's chunks as they arrived)


@dataclass
class Dispatcher:
    """Sends work through the proxy at `root` (the proxy's URL), as one run."""

    session: aiohttp.ClientSession
    root: str
    run_id: str
    timeout: float
    catalog_sender: Sender | None = None
    auth: str | None = field(default=None, repr=False)

    async def send(self, work: Work, tags: Mapping[str, str], sent: Sent) -> Sent:
        headers = {"X-Bench-Run": self.run_id, **{f"X-Bench-{k}": v for k, v in tags.items()}}
        try:
            if isinstance(work, LoadRequest):
                await self._request(work, headers, sent)
            else:
                await self._job(work, headers, sent)
        finally:
            sent.end = time.monotonic()
        return sent

    async def _request(self, req: LoadRequest, tags: dict[str, str], sent: Sent) -> None:
        headers = {**dict(req.headers), **tags}
        if self.auth:
            headers["Authorization"] = f"Bearer {self.auth}"
        headers.setdefault("Content-Type", "application/json")
        try:
            async with asyncio.timeout(self.timeout):
                async with self.session.request(
                    req.method, self.root + req.path, data=req.body, headers=headers
                ) as resp:
                    async for _ in resp.content.iter_any():
                        sent.reads += 1
                    sent.ok = resp.status < 400
                    sent.error = None if sent.ok else f"HTTP {resp.status}"
        except TimeoutError:
            sent.error = "timeout"
        except aiohttp.ClientPayloadError:
            sent.error = "truncated"
        except aiohttp.ClientError as exc:
            sent.error = type(exc).__name__

    async def _job(self, item: CatalogJob, tags: dict[str, str], sent: Sent) -> None:
        assert self.catalog_sender is not None, "a catalog job needs the run's catalog sender"
        sender = TaggedSender(**{**vars(self.catalog_sender), "tags": tags})
        result = await run_job(sender, item.job)
        sent.ok, sent.requests = result.ok, max(1, result.requests)
        sent.error = None if result.ok else (result.error or "failed")


@dataclass
class TaggedSender(Sender):
    """The driver's sender with the load run's tags on every request of a job."""

    tags: Mapping[str, str] = field(default_factory=dict)

    def headers(self, job: Job, turn: int, attempt: int) -> dict[str, str]:
        return {**super().headers(job, turn, attempt), **self.tags}
