"""Rules files: score traffic that no catalog test claims with the catalog's evaluators (docs/rules.md).

A rule selects exchanges by endpoint, requested model (shell-style patterns), request content (a regular expression
searched in the request's text: its messages, input, instructions or prompt) and the tools it offers, and applies
checks exactly as a catalog test does. Each selected exchange becomes one result with the rule id in place of a test
id (suite `rules`); the n-th exchange a rule selects for a model is epoch n, so two recordings of the same traffic
pair up in `bench compare`. Checks that need a workspace (file_*, command_succeeds) have none to run in and are
refused when the file is loaded.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from bench.catalog.model import Check, TestSpec
from bench.core.endpoints import RESPONSES
from bench.core.errors import BenchError
from bench.core.responses_request import chat_from_responses
from bench.core.yamlfile import load_checked_yaml
from bench.scorer.checks import find_evaluator
from bench.scorer.registry import arg_problem

SUITE = "rules"


@dataclass(frozen=True)
class Rule:
    id: str
    description: str
    category: str
    endpoints: tuple[str, ...]
    models: tuple[str, ...]
    request: re.Pattern[str] | None
    tools: tuple[str, ...]
    tagged: bool
    checks: tuple[Check, ...]
    pass_threshold: float
    hash: str

    def matches(self, endpoint: str, model: str, doc: Mapping[str, Any] | None, tagged: bool) -> bool:
        if tagged and not self.tagged:
            return False
        if self.endpoints and endpoint not in self.endpoints:
            return False
        if self.models and not any(fnmatch.fnmatchcase(model, pattern) for pattern in self.models):
            return False
        if self.tools and not set(self.tools) <= set(offered_tools(doc)):
            return False
        return self.request is None or bool(self.request.search(request_text(doc)))


@cache
def rules_schema() -> dict[str, Any]:
    text = resources.files("bench.scorer").joinpath("schema/rules.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def load_rules(path: Path) -> tuple[Rule, ...]:
    """Load and validate a rules file; any problem is one BenchError line naming the file, the field and the fix."""
    data = load_checked_yaml(path, rules_schema(), what="rules file", flag="--rules", doc="docs/rules.md")
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, raw in enumerate(data["rules"]):
        where = f"rules.{index}"
        if raw["id"] in seen:
            raise BenchError(f"{path}: field '{where}.id': rule id {raw['id']!r} is used twice; give each rule its own")
        seen.add(raw["id"])
        match = raw.get("match") or {}
        pattern = None
        if "request" in match:
            try:
                pattern = re.compile(match["request"])
            except re.error as exc:
                raise BenchError(f"{path}: field '{where}.match.request': bad regular expression ({exc})") from None
        checks = []
        for c, entry in enumerate(raw["checks"]):
            name = entry["evaluator"]
            field = f"{where}.checks.{c}"
            ev = find_evaluator(name)
            if ev is None:
                raise BenchError(f"{path}: field '{field}.evaluator': unknown evaluator {name!r}; see docs/catalog.md")
            if ev.needs_workspace:
                raise BenchError(f"{path}: field '{field}.evaluator': {name} needs a workspace, which traffic lacks")
            args = dict(entry.get("args") or {})
            problem = arg_problem(ev, args)
            if problem is not None:
                raise BenchError(f"{path}: field '{field}.args': {name}: {problem[1]}")
            checks.append(Check(name, args, float(entry.get("weight", 1.0))))
        canonical = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
        rules.append(
            Rule(
                id=raw["id"],
                description=raw.get("description", ""),
                category=raw.get("category", SUITE),
                endpoints=_strings(match.get("endpoint")),
                models=_strings(match.get("model")),
                request=pattern,
                tools=_strings(match.get("tools")),
                tagged=bool(match.get("tagged", False)),
                checks=tuple(checks),
                pass_threshold=float(raw.get("pass_threshold", 1.0)),
                hash=hashlib.sha256(canonical).hexdigest(),
            )
        )
    return tuple(rules)


def as_chat(doc: Mapping[str, Any] | None, endpoint: str) -> Mapping[str, Any]:
    """The request as a chat request (a Responses API request translated), for matching and evaluators."""
    if not doc:
        return {}
    return chat_from_responses(doc) if endpoint == RESPONSES else doc


def _texts(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _texts(item, out)
    elif isinstance(value, Mapping):
        for key in ("content", "text", "output", "arguments"):
            if key in value:
                _texts(value[key], out)


def request_text(doc: Mapping[str, Any] | None) -> str:
    """The request's text: instructions, messages or input items, prompt; joined with newlines."""
    if not doc:
        return ""
    out: list[str] = []
    for key in ("instructions", "messages", "input", "prompt"):
        _texts(doc.get(key), out)
    return "\n".join(out)


def offered_tools(doc: Mapping[str, Any] | None) -> list[str]:
    names: list[str] = []
    for tool in (doc or {}).get("tools") or ():
        if isinstance(tool, Mapping):
            inner = tool.get("function")
            fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
            if isinstance(fn.get("name"), str):
                names.append(fn["name"])
    return names


def rule_spec(rule: Rule, chat: Mapping[str, Any]) -> TestSpec:
    """The rule as a one-turn test over this request: its messages and tools are what evaluators compare against."""
    messages = chat.get("messages")
    tools = chat.get("tools")
    return TestSpec(
        id=rule.id,
        suite=SUITE,
        category=rule.category,
        subcategory=rule.id,
        description=rule.description,
        messages=tuple(m for m in messages if isinstance(m, Mapping)) if isinstance(messages, Sequence) else (),
        tools=tuple(t for t in tools if isinstance(t, Mapping)) if isinstance(tools, Sequence) else (),
        checks=rule.checks,
        pass_threshold=rule.pass_threshold,
        hash=rule.hash,
    )
