"""Concurrency: a global cap and per-model caps that never starve the other models.

A job takes its model's slot before a global one, so a job held back by its model's cap never sits on a global
slot that another model could use; both semaphores are FIFO, so dispatch order is kept within each.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager


class Limiter:
    def __init__(self, total: int, per_model: Mapping[str, int]) -> None:
        self._total = asyncio.Semaphore(total)
        self._models = {m: asyncio.Semaphore(min(n, total)) for m, n in per_model.items()}

    @asynccontextmanager
    async def slot(self, model: str) -> AsyncIterator[None]:
        own = self._models.get(model)
        if own is None:
            async with self._total:
                yield
            return
        async with own, self._total:
            yield
