"""Recognise which catalog test a request belongs to, from the request alone.

The proxy strips X-Bench-* headers, so the sim identifies a test by a hash of its opening messages (role and
content) and the turn by the number of assistant messages that follow them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from bench.catalog.model import Catalog, TestSpec


def messages_key(messages: Sequence[Mapping[str, Any]]) -> str:
    digest = hashlib.sha256()
    for m in messages:
        digest.update(orjson.dumps({"role": m.get("role"), "content": m.get("content")}, option=orjson.OPT_SORT_KEYS))
        digest.update(b"\n")
    return digest.hexdigest()


class CatalogIndex:
    def __init__(self, catalog: Catalog | None) -> None:
        self._by_key: dict[tuple[int, str], TestSpec] = {}
        self._lengths: list[int] = []
        if catalog is not None:
            for test in catalog.tests.values():
                self._by_key[(len(test.messages), messages_key(test.messages))] = test
            self._lengths = sorted({n for n, _ in self._by_key}, reverse=True)

    def __len__(self) -> int:
        return len(self._by_key)

    def find(self, messages: Sequence[Mapping[str, Any]]) -> tuple[TestSpec | None, int]:
        """The test whose opening conversation starts `messages`, and the turn (assistant messages after it)."""
        for n in self._lengths:
            if n > len(messages):
                continue
            test = self._by_key.get((n, messages_key(messages[:n])))
            if test is not None:
                turn = sum(1 for m in messages[n:] if m.get("role") == "assistant")
                return test, turn
        return None, sum(1 for m in messages if m.get("role") == "assistant")
