"""Recognise untagged exchanges that repeat a catalog test's request exactly, so they are scored as that test.

A request is a catalog test's when its messages start with the test's opening conversation exactly (role, content,
tool calls and tool results, compared as canonical JSON) and it offers the test's tools exactly; the assistant
messages after the opening say which turn it is. A Responses API request is compared as the chat request it
translates to. Untagged traffic carries no epoch: each turn-0 request for a (model, test) starts the next epoch,
unless the one before it failed (no status, >= 400, or not complete), which makes it a retry of the same epoch; a
later turn belongs to the newest epoch of its (model, test).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.catalog.model import Catalog, TestSpec
from bench.core.cassette.records import Exchange


def _key(messages: Sequence[Any], tools: Sequence[Any]) -> str:
    blob = orjson.dumps([list(messages), list(tools)], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


@dataclass
class Recognised:
    test: TestSpec
    epoch: int
    turn: int
    attempt: int


@dataclass
class Recogniser:
    by_key: dict[tuple[int, str], TestSpec] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)
    epochs: dict[tuple[str, str], int] = field(default_factory=dict)
    attempts: dict[tuple[str, str, int], int] = field(default_factory=dict)
    failed: dict[tuple[str, str, int], bool] = field(default_factory=dict)

    @classmethod
    def of(cls, catalog: Catalog) -> Recogniser:
        out = cls()
        for test in catalog.tests.values():
            if not test.messages:
                continue  # an empty opening conversation would claim every request
            out.by_key[(len(test.messages), _key(test.messages, test.tools))] = test
        out.lengths = sorted({n for n, _ in out.by_key}, reverse=True)
        return out

    def find(self, chat: Mapping[str, Any]) -> tuple[TestSpec, int] | None:
        messages = chat.get("messages")
        if not isinstance(messages, list) or not self.by_key:
            return None
        tools = chat.get("tools") or []
        if not isinstance(tools, list):
            return None
        for n in self.lengths:
            if n > len(messages):
                continue
            test = self.by_key.get((n, _key(messages[:n], tools)))
            if test is not None:
                turn = sum(1 for m in messages[n:] if isinstance(m, Mapping) and m.get("role") == "assistant")
                return test, turn
        return None

    def claim(self, chat: Mapping[str, Any], model: str, record: Exchange) -> Recognised | None:
        """The test, epoch, turn and attempt of this exchange, counting it (call once per exchange, in order)."""
        found = self.find(chat)
        if found is None:
            return None
        test, turn = found
        key = (model, test.id)
        if turn == 0 and not self.failed.get((model, test.id, 0), False):
            self.epochs[key] = self.epochs.get(key, -1) + 1
        epoch = max(0, self.epochs.get(key, 0))
        slot = (model, test.id, epoch * 1000 + turn)
        self.attempts[slot] = attempt = self.attempts.get(slot, 0) + 1
        status = record.response.status
        self.failed[(model, test.id, turn)] = status is None or status >= 400 or record.outcome != "complete"
        return Recognised(test, epoch, turn, attempt)
