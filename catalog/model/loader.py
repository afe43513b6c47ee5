"""Loading YAML suites into TestSpecs: schema validation, defaults, built-in tools, messages and hashes.

Every problem becomes a one-line BenchError naming the file, the test id and the field, because catalogs are
hand-written and the first reader of an error is the person editing the YAML.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import yaml

from bench.catalog import FIXTURES_DIR, SCHEMA_FILE, SUITES_DIR, TOOLS_DIR
from bench.catalog.model.check_rules import CheckRules
from bench.catalog.model.spec import Catalog, Check, Limits, RefCall, Reference, TestSpec, Workspace
from bench.core.errors import BenchError
from bench.core.nesting import TooDeep, load_yaml
from bench.core.yamlfile import read_yaml_text

# Multi-turn tasks need room to read, edit and run tests; a test can lower or raise these.
WORKSPACE_LIMITS = Limits(max_turns=12, max_calls=20)
_MERGED_DEFAULTS = ("params", "limits")


@cache
def suite_schema() -> dict[str, Any]:
    with SCHEMA_FILE.open(encoding="utf-8") as fh:
        schema: dict[str, Any] = json.load(fh)
    return schema


@cache
def builtin_tools() -> dict[str, dict[str, Any]]:
    """Named single-turn function tools from catalog/data/tools/*.yaml, as OpenAI tool schemas."""
    tools: dict[str, dict[str, Any]] = {}
    for file in sorted(TOOLS_DIR.glob("*.yaml")):
        data = load_yaml(read_yaml_text(file, "tool file")) or {}
        for entry in data.get("tools", []):
            if entry["name"] in tools:
                raise BenchError(f"{file}: built-in tool {entry['name']!r} is defined twice; rename one")
            tools[entry["name"]] = _function_schema(entry)
    return tools


def _function_schema(entry: Mapping[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": entry["name"]}
    if "description" in entry:
        function["description"] = entry["description"]
    function["parameters"] = entry.get("parameters", {"type": "object", "properties": {}})
    if "strict" in entry:
        function["strict"] = entry["strict"]
    return {"type": "function", "function": function}


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, compact): the input of every catalog hash."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


@cache
def fixture_hash(path: Path) -> str:
    """sha256 over the fixture's files (relative path and contents), so editing a fixture changes the tests' hashes."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink()):
        rel = file.relative_to(path)
        if "__pycache__" in rel.parts or file.suffix == ".pyc":
            continue
        digest.update(rel.as_posix().encode() + b"\0")
        content = str(file.readlink()).encode() if file.is_symlink() else file.read_bytes()
        digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()


def _field(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _SuiteLoader:
    def __init__(self, file: Path, root: Path, rules: CheckRules | None) -> None:
        self.file = file
        self.root = root
        self.rules = rules
        self.test_id = ""

    def fail(self, field: str, message: str) -> BenchError:
        where = f"test {self.test_id!r}: " if self.test_id else ""
        return BenchError(f"{self.file}: {where}{field}: {_one_line(message)}")

    def load(self) -> list[TestSpec]:
        try:
            data = load_yaml(read_yaml_text(self.file, "catalog suite"))
        except TooDeep as exc:
            raise self.fail("YAML", f"{exc}; a suite never needs that: flatten it") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f"line {mark.line + 1}" if mark is not None else "YAML"
            raise self.fail(line, f"not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BenchError(f"{self.file}: cannot read the suite: {exc}") from None
        self.validate(data)
        defaults: Mapping[str, Any] = data.get("defaults", {})
        return [self.build(data["suite"], defaults, index, raw) for index, raw in enumerate(data["tests"])]

    def validate(self, data: Any) -> None:
        validator = jsonschema.Draft202012Validator(suite_schema())
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
        if error is None:
            return
        path = list(error.absolute_path)
        if len(path) >= 2 and path[0] == "tests" and isinstance(path[1], int):
            test = data["tests"][path[1]]
            if isinstance(test, Mapping) and isinstance(test.get("id"), str):
                self.test_id = test["id"]
        if error.validator == "oneOf" and error.schema_path and "prompt" in str(error.schema):
            message = "give exactly one of `prompt` or `messages`"
        else:
            message = error.message
        raise self.fail(_field(path), message)

    def build(self, suite: str, defaults: Mapping[str, Any], index: int, raw: Mapping[str, Any]) -> TestSpec:
        self.test_id = raw["id"]
        where = f"tests[{index}]"
        spec: dict[str, Any] = {**defaults, **raw}
        for key in _MERGED_DEFAULTS:
            if key in defaults and key in raw:
                spec[key] = {**defaults[key], **raw[key]}
        for key in ("category", "subcategory"):
            if key not in spec:
                raise self.fail(f"{where}.{key}", f"missing: set `{key}` on the test or in the suite's defaults")
        workspace = self.workspace(spec.get("workspace"), where)
        tools = self.tools(spec.get("tools", []), workspace, where)
        tool_names = [t["function"]["name"] for t in tools]
        checks = self.checks(spec["checks"], tool_names, where)
        reference = self.reference(spec["reference"], tool_names, where)
        messages = self.messages(spec)
        params = dict(spec.get("params", {}))
        limits = Limits(**spec["limits"]) if "limits" in spec else (WORKSPACE_LIMITS if workspace else Limits())
        request = {
            "messages": messages,
            "tools": tools,
            "params": params,
            "limits": {"max_turns": limits.max_turns, "max_calls": limits.max_calls},
            "workspace": self.workspace_hash_input(spec.get("workspace"), workspace),
        }
        return TestSpec(
            id=f"{suite}.{raw['id']}",
            suite=suite,
            category=spec["category"],
            subcategory=spec["subcategory"],
            description=spec["description"].strip(),
            messages=tuple(messages),
            tools=tuple(tools),
            params=params,
            checks=checks,
            reference=reference,
            workspace=workspace,
            limits=limits,
            pass_threshold=float(spec.get("pass_threshold", 1.0)),
            hash=hashlib.sha256(canonical(request)).hexdigest(),
            source=self.file,
        )

    def workspace(self, raw: Mapping[str, Any] | None, where: str) -> Workspace | None:
        if raw is None:
            return None
        from bench.workspace import WORKSPACE_TOOLS

        name = raw["fixture"]
        path = self.find_fixture(name)
        if path is None:
            raise self.fail(
                f"{where}.workspace.fixture", f"no fixture {name!r} (looked in fixtures/ beside the suites)"
            )
        tools = tuple(raw.get("tools", WORKSPACE_TOOLS))
        allow = tuple(raw.get("allow_commands", ()))
        if "run_command" in tools and not allow:
            raise self.fail(f"{where}.workspace.allow_commands", "run_command is offered but no command is allowed")
        fixture = name if path == (FIXTURES_DIR / name).resolve() else str(path)
        return Workspace(fixture=fixture, tools=tools, allow_commands=allow)

    def find_fixture(self, name: str) -> Path | None:
        for base in (self.root / "fixtures", self.root.parent / "fixtures", FIXTURES_DIR):
            if (base / name).is_dir():
                return (base / name).resolve()
        return None

    def workspace_hash_input(self, raw: Mapping[str, Any] | None, ws: Workspace | None) -> Any:
        if raw is None or ws is None:
            return None
        path = self.find_fixture(raw["fixture"])
        assert path is not None
        # The fixture's name and contents, not where it lies on disk: the same catalog hashes the same anywhere.
        return {"fixture": raw["fixture"], "files": fixture_hash(path), "tools": ws.tools, "allow": ws.allow_commands}

    def tools(self, raw: list[Any], workspace: Workspace | None, where: str) -> list[dict[str, Any]]:
        from bench.workspace import workspace_tool_schemas

        known = builtin_tools()
        tools: list[dict[str, Any]] = []
        for index, entry in enumerate(raw):
            if isinstance(entry, str):
                if entry not in known:
                    raise self.fail(
                        f"{where}.tools[{index}]",
                        f"unknown built-in tool {entry!r}; define it inline or choose from {', '.join(sorted(known))}",
                    )
                tools.append(known[entry])
            elif "function" in entry:
                tools.append({"type": "function", "function": dict(entry["function"])})
            else:
                tools.append(_function_schema(entry))
        if workspace is not None:
            tools = workspace_tool_schemas(workspace.tools) + tools
        names = [t["function"]["name"] for t in tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise self.fail(f"{where}.tools", f"tool {duplicates[0]!r} is offered twice")
        return tools

    def checks(self, raw: list[Mapping[str, Any]], tool_names: list[str], where: str) -> tuple[Check, ...]:
        checks = []
        for index, entry in enumerate(raw):
            field = f"{where}.checks[{index}]"
            name = entry["evaluator"]
            args = dict(entry.get("args", {}))
            checks.append(Check(evaluator=name, args=args, weight=float(entry.get("weight", 1.0))))
            if self.rules is None:
                continue
            if not self.rules.known(name):
                raise self.fail(f"{field}.evaluator", f"unknown evaluator {name!r}; see docs/catalog.md for the list")
            problem = self.rules.problem(name, args)
            if problem is not None:
                raise self.fail(_field([f"{field}.args", *problem[0]]), f"{name}: {problem[1]}")
            for key in self.rules.tool_args(name):
                named = args.get(key)
                for tool_name in [named] if isinstance(named, str) else named or []:
                    if tool_name not in tool_names:
                        raise self.fail(f"{field}.args.{key}", f"{tool_name!r} is not one of the test's tools")
        return tuple(checks)

    def reference(self, raw: Mapping[str, Any], tool_names: list[str], where: str) -> Reference:
        turns = []
        for t, turn in enumerate(raw.get("turns", [])):
            calls = []
            for c, call in enumerate(turn):
                if call["name"] not in tool_names:
                    raise self.fail(
                        f"{where}.reference.turns[{t}][{c}].name", f"{call['name']!r} is not one of the test's tools"
                    )
                calls.append(RefCall(name=call["name"], arguments=dict(call["arguments"])))
            turns.append(tuple(calls))
        return Reference(answer=raw.get("answer"), turns=tuple(turns))

    def messages(self, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
        system = spec.get("system")
        if "messages" in spec:
            messages = [dict(m) for m in spec["messages"]]
            if system and messages[0].get("role") != "system":
                messages.insert(0, {"role": "system", "content": system})
            return messages
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": spec["prompt"]})
        return messages


def suite_files(path: Path) -> tuple[Path, list[Path]]:
    """The catalog root and its suite files (sorted); a single file is a catalog of one suite."""
    if path.is_file():
        return path.parent, [path]
    if not path.is_dir():
        raise BenchError(f"no catalog at {path}: give a directory of *.yaml suites or one suite file")
    files = sorted(p for p in path.rglob("*.yaml") if p.is_file())
    if not files:
        raise BenchError(f"no *.yaml suite files under {path}")
    return path, files


def load_catalog(path: Path | None, *, rules: CheckRules | None) -> Catalog:
    """Every suite under `path` (None: the built-in suites); checks' evaluators and arguments are checked against
    `rules` (the scorer's registry), or not at all when None (the simulator, which answers and never scores)."""
    root, files = suite_files(Path(path) if path is not None else SUITES_DIR)
    tests: dict[str, TestSpec] = {}
    suites: dict[str, Path] = {}
    for file in files:
        for spec in _SuiteLoader(file, root, rules).load():
            if spec.suite in suites and suites[spec.suite] != file:
                raise BenchError(f"{file}: suite {spec.suite!r} is also defined in {suites[spec.suite]}; rename one")
            suites[spec.suite] = file
            if spec.id in tests:
                raise BenchError(f"{file}: test {spec.id.split('.', 1)[1]!r}: id: duplicate id {spec.id!r}")
            tests[spec.id] = spec
    digest = hashlib.sha256("\n".join(sorted(t.hash for t in tests.values())).encode()).hexdigest()
    return Catalog(tests=dict(sorted(tests.items())), hash=digest, root=root)
