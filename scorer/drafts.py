"""`bench catalog from-traffic`: recorded traffic drafted into catalog tests for a person to edit (docs/catalog.md).

A conversation (an agent session, bench.scorer.sessions; or one exchange) becomes one test: its first request's
messages, tools and sampling parameters as the test's request, the recorded answers as its reference (the tool calls
of each turn, the last answer's text), and checks suggested from them that the reference passes: `tool_called` and
`tool_args` (each argument's recorded value) for the calls, `no_tool_call` when tools were offered and none called,
and for the last text `valid_json`, `equals` (a short answer) or `contains_all` (a longer one's longest words). The
draft is as strict as the recording: loosening it is the editor's job.

The test's request is the recorded one exactly, so `bench rescore CASSETTES --catalog DRAFTS` recognises the
recorded exchanges as the test (docs/rules.md, "Catalog tests recognised without tags") and scores them. A
conversation that a catalog test cannot hold exactly (content parts, tools other than functions, a failed exchange,
no answer) is left out and counted. Every drafted test is loaded and its reference checked, as `bench catalog
validate` does, before the file is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.endpoints import endpoint_of
from bench.core.errors import BenchError
from bench.core.imported import ImportedExchange
from bench.core.parse import parse_exchange
from bench.core.traffic_files import imported_exchanges
from bench.scorer.rules import as_chat
from bench.scorer.sessions import SessionLinker
from bench.scorer.traffic_lines import traffic_entry

MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_call_id", "tool_calls"})
ROLES = frozenset({"system", "user", "assistant", "tool"})
PARAMS: dict[str, tuple[type, ...]] = {
    "max_tokens": (int,),
    "max_completion_tokens": (int,),
    "temperature": (int, float),
    "top_p": (int, float),
    "stop": (str, list),
    "response_format": (dict,),
    "tool_choice": (str, dict),
    "parallel_tool_calls": (bool,),
    "seed": (int,),
    "presence_penalty": (int, float),
    "frequency_penalty": (int, float),
    "reasoning_effort": (str,),
}
SHORT_ANSWER = 120
RECORDED_MODES = ("record", "auto-record")


@dataclass
class Seen:
    """One exchange as a draft needs it: the request as a chat request, and its answer."""

    origin: str
    session: str
    chat: Mapping[str, Any]
    content: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, arguments: parsed JSON or None)
    ok: bool = True


@dataclass
class Drafted:
    tests: list[dict[str, Any]]
    skipped: Counter[str]
    conversations: int


def seen_in_cassettes(paths: Sequence[Path]) -> Iterator[Seen]:
    """Recorded exchanges (replays left out: they repeat a recording) in start order, each with its session."""
    linker = SessionLinker()
    for path in find_cassettes(list(paths)):
        records = sorted((r for r in CassetteReader(path) if r.mode in RECORDED_MODES), key=lambda r: (r.started, r.id))
        for record in records:
            parsed = parse_exchange(record)
            line = linker.link(traffic_entry(record, parsed, path.name, ""))
            yield Seen(
                origin=f"{path.name}#{record.id}",
                session=line.session or f"{path.name}#{record.id}",
                chat=as_chat(parsed.request_json, parsed.endpoint),
                content=parsed.content,
                calls=[(c.name, c.parsed_arguments if c.valid_json else None) for c in parsed.tool_calls],
                ok=parsed.ok and not line.failed,
            )


def seen_in_imports(exchanges: Iterable[ImportedExchange]) -> Iterator[Seen]:
    for e in exchanges:
        try:
            doc = orjson.loads(e.body)
        except orjson.JSONDecodeError:
            continue
        answer = e.answer
        yield Seen(
            origin=e.origin,
            session=e.session or e.origin,
            chat=as_chat(doc if isinstance(doc, dict) else None, endpoint_of(e.path)),
            content=answer.content if answer else "",
            calls=[(c.name, _loads(c.arguments)) for c in answer.tool_calls] if answer else [],
            ok=answer is not None and answer.ok,
        )


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def seen_in(paths: Sequence[Path]) -> list[Seen]:
    """Cassettes (files or folders) and trace or log files, each read as what it is."""
    cassettes = [p for p in paths if p.is_dir() or p.suffix == ".cassette"]
    others = [p for p in paths if p not in cassettes]
    seen = list(seen_in_cassettes(cassettes)) if cassettes else []
    if others:
        seen.extend(seen_in_imports(imported_exchanges(others)))
    return seen


def draft(seen: Iterable[Seen], suite: str) -> Drafted:
    sessions: dict[str, list[Seen]] = {}
    for s in seen:
        sessions.setdefault(s.session, []).append(s)
    tests: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    keys: set[str] = set()
    ids: set[str] = set()
    for conversation in sessions.values():
        test, why = _test(conversation)
        if test is None:
            skipped[why] += 1
            continue
        key = hashlib.sha256(orjson.dumps([test["messages"], test.get("tools", [])], option=orjson.OPT_SORT_KEYS))
        if key.hexdigest() in keys:
            skipped["the same request as a test drafted already"] += 1
            continue
        keys.add(key.hexdigest())
        test = {"id": _unique(_slug(test["messages"]), ids), **test}
        tests.append(test)
    return Drafted(tests, skipped, len(sessions))


def _test(conversation: list[Seen]) -> tuple[dict[str, Any] | None, str]:
    first, last = conversation[0], conversation[-1]
    if not all(s.ok for s in conversation):
        return None, "an exchange failed"
    messages = first.chat.get("messages")
    if not isinstance(messages, list) or not messages or not all(_plain_message(m) for m in messages):
        return None, "messages a catalog test cannot hold exactly (content parts, other fields)"
    tools = first.chat.get("tools") or []
    if not isinstance(tools, list) or not all(_plain_tool(t) for t in tools):
        return None, "tools other than functions"
    if any(args is None or not isinstance(args, dict) for s in conversation for _, args in s.calls):
        return None, "a tool call whose arguments are not a JSON object"
    turns = [[{"name": n, "arguments": a} for n, a in s.calls] for s in conversation if s.calls]
    answer = last.content
    if not turns and not answer:
        return None, "no answer"
    checks = _checks(conversation, bool(tools), answer)
    test: dict[str, Any] = {
        "category": "traffic",
        "subcategory": "tool_calling" if turns else "chat",
        "description": f"Drafted from {first.origin} ({len(conversation)} exchange(s)); the checks hold the recorded "
        "answer: loosen them.",
        "messages": messages,
    }
    if tools:
        test["tools"] = tools
    params = {k: v for k, v in first.chat.items() if k in PARAMS and _param_ok(k, v)}
    if params:
        test["params"] = params
    if len(conversation) > 1:
        test["limits"] = {"max_turns": min(len(conversation), 100), "max_calls": min(sum(map(len, turns)), 500)}
    test["checks"] = checks
    reference: dict[str, Any] = {}
    if answer:
        reference["answer"] = answer
    if turns:
        reference["turns"] = turns
    test["reference"] = reference
    return test, ""


def _plain_message(m: Any) -> bool:
    return (
        isinstance(m, dict)
        and m.get("role") in ROLES
        and set(m) <= MESSAGE_KEYS
        and (m.get("content") is None or isinstance(m.get("content"), str))
    )


def _plain_tool(t: Any) -> bool:
    fn = t.get("function") if isinstance(t, dict) else None
    return isinstance(fn, dict) and set(t) == {"type", "function"} and t["type"] == "function" and "name" in fn


def _param_ok(key: str, value: Any) -> bool:
    kinds = PARAMS[key]
    number: Any = value  # narrowed below by the isinstance checks
    if isinstance(value, bool) and bool not in kinds:
        return False
    if not isinstance(value, kinds):
        return False
    if key in ("max_tokens", "max_completion_tokens"):
        return bool(number >= 1)
    if key == "temperature":
        return bool(0 <= number <= 2)
    if key == "top_p":
        return bool(0 <= number <= 1)
    if key == "response_format":
        return "type" in number
    if key == "stop" and isinstance(value, list):
        return all(isinstance(s, str) for s in value)
    return True


def _checks(conversation: list[Seen], offered: bool, answer: str) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    firsts: dict[str, dict[str, Any]] = {}
    for s in conversation:
        for name, args in s.calls:
            firsts.setdefault(name, args)
    for name, args in firsts.items():
        checks.append({"evaluator": "tool_called", "args": {"name": name}})
        matchers = {k: v if _scalar(v) else {"any": True} for k, v in args.items()}
        if matchers:
            checks.append({"evaluator": "tool_args", "args": {"name": name, "args": matchers}})
    if offered and not firsts:
        checks.append({"evaluator": "no_tool_call"})
    if answer:
        checks.append(_text_check(answer))
    return checks


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _text_check(answer: str) -> dict[str, Any]:
    try:
        parsed = json.loads(answer)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict | list):
        return {"evaluator": "valid_json"}
    if len(answer) <= SHORT_ANSWER and "\n" not in answer.strip():
        return {"evaluator": "equals", "args": {"value": answer.strip()}}
    words = sorted(set(re.findall(r"[A-Za-z]{5,}", answer)), key=lambda w: (-len(w), w))[:3]
    if not words:
        return {"evaluator": "contains_all", "args": {"values": [answer.strip()[:40]]}}
    return {"evaluator": "contains_all", "args": {"values": words}}


def _slug(messages: list[dict[str, Any]]) -> str:
    text = next((m.get("content") for m in messages if m.get("role") == "user" and m.get("content")), "") or ""
    words = re.findall(r"[a-z0-9]+", str(text).lower())[:6]
    slug = "_".join(words)[:40].strip("_")
    return slug or "exchange"


def _unique(slug: str, ids: set[str]) -> str:
    name, n = slug, 1
    while name in ids:
        n += 1
        name = f"{slug}_{n}"
    ids.add(name)
    return name


def write_suite(tests: list[dict[str, Any]], suite: str, out: Path) -> Path:
    """The suite file `out`/SUITE.yaml (written whole, then renamed)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", suite):
        raise BenchError(f"--suite {suite}: a suite name is lower-case letters, digits and _, starting with a letter")
    doc = {
        "suite": suite,
        "description": "Tests drafted from recorded traffic by bench catalog from-traffic; edit before use.",
        "tests": tests,
    }
    target = out / f"{suite}.yaml"
    tmp = out / f".{suite}.yaml.tmp"
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"cannot write {target}: {exc.strerror}; choose another --out") from None
    return target


def checked(path: Path) -> list[str]:
    """The drafted suite loaded as `bench catalog validate` loads it; the ids of tests whose reference fails."""
    from bench.scorer.checked_catalog import load_catalog
    from bench.scorer.reference import check_reference

    catalog = load_catalog(path)
    return [t.id.split(".", 1)[-1] for t in catalog.tests.values() if check_reference(t)]
