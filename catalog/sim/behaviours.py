"""Simulated models, by name: a registry of behaviours with a decorator.

A behaviour turns a request into a Reply. `oracle` answers every catalog test with its reference; each `flawed-*`
profile is the oracle with one kind of mistake, named after the scorer failure type it produces
(docs/sim.md). Requests the sim does not recognise get a generic answer, so any OpenAI client can talk to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from bench.catalog.sim.reply import Reply, SimCall, SimRequest

Behaviour = Callable[[SimRequest], Reply]

BEHAVIOURS: dict[str, Behaviour] = {}

# Workspace tools that only look: a looping model repeats one of these so the loop itself is the only damage.
READ_ONLY_TOOLS = ("read_file", "list_dir", "grep")
EDIT_TOOLS = ("edit_file", "apply_patch")


def behaviour(name: str) -> Callable[[Behaviour], Behaviour]:
    def register(fn: Behaviour) -> Behaviour:
        if name in BEHAVIOURS:
            raise ValueError(f"simulated model {name!r} registered twice")
        BEHAVIOURS[name] = fn
        return fn

    return register


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


# -- the oracle -------------------------------------------------------------------------------------------------------


@behaviour("oracle")
def oracle(req: SimRequest) -> Reply:
    test = req.test
    if test is None:
        return generic(req)
    turns = test.reference.turns
    if req.turn < len(turns):
        calls = tuple(SimCall(c.name, dumps(dict(c.arguments))) for c in turns[req.turn])
        return Reply(tool_calls=calls)
    return Reply(content=test.reference.answer or "")


def generic(req: SimRequest) -> Reply:
    """For requests outside the catalog (`bench doctor`, ad hoc clients, agents): call each offered tool once, in
    order, then answer with what the tools returned; without tools, talk."""
    last = req.messages[-1] if req.messages else {}
    choice = req.body.get("tool_choice")
    since_user = _since_last_user(req.messages)
    if req.tools and choice != "none" and last.get("role") in ("user", "tool"):
        called = {
            (call.get("function") or {}).get("name")
            for m in since_user
            if m.get("role") == "assistant"
            for call in m.get("tool_calls") or ()
            if isinstance(call, Mapping)
        }
        for tool, name in zip(req.tools, req.tool_names, strict=False):
            if name not in called:
                return Reply(tool_calls=(SimCall(name, dumps(example_arguments(tool))),))
    if last.get("role") == "tool":
        results = [str(m.get("content") or "")[:200] for m in since_user if m.get("role") == "tool"]
        return Reply(content="Done: " + "; ".join(results))
    return Reply(content="Hello from the bench simulator. This answer is simulated; no model ran.")


def _since_last_user(messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return messages[i + 1 :]
    return messages


def example_arguments(tool: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy a function schema's required properties (a plausible value per JSON type)."""
    params = (tool.get("function") or {}).get("parameters") or {}
    props: Mapping[str, Any] = params.get("properties") or {}
    out: dict[str, Any] = {}
    for key in params.get("required") or list(props)[:1]:
        schema = props.get(key) or {}
        kind = schema.get("type")
        if schema.get("enum"):
            out[key] = schema["enum"][0]
        elif kind == "integer":
            out[key] = 1
        elif kind == "number":
            out[key] = 1.0
        elif kind == "boolean":
            out[key] = True
        elif kind == "array":
            out[key] = []
        elif kind == "object":
            out[key] = {}
        else:
            out[key] = "example"
    return out


# -- flawed profiles: the oracle with one mistake ----------------------------------------------------------------------


def flawed(name: str) -> Callable[[Callable[[SimRequest, Reply], Reply]], Behaviour]:
    """Register a profile as a transformation of the oracle's reply."""

    def register(transform: Callable[[SimRequest, Reply], Reply]) -> Behaviour:
        def run(req: SimRequest) -> Reply:
            return transform(req, oracle(req))

        behaviour(name)(run)
        return run

    return register


@flawed("flawed-invalid-json")
def _invalid_json(req: SimRequest, reply: Reply) -> Reply:
    if not reply.tool_calls:
        return reply
    first, *rest = reply.tool_calls
    # A closing brace lost at the end, the most common way a small model breaks its arguments.
    broken = SimCall(first.name, first.arguments[:-1] if first.arguments.endswith("}") else first.arguments + "{")
    return Reply(tool_calls=(broken, *rest))


@flawed("flawed-text-tool-call")
def _text_tool_call(req: SimRequest, reply: Reply) -> Reply:
    if not reply.tool_calls:
        return reply
    text = "\n".join(
        f'<tool_call>\n{{"name": "{c.name}", "arguments": {c.arguments}}}\n</tool_call>' for c in reply.tool_calls
    )
    return Reply(content=text)


@flawed("flawed-no-call")
def _no_call(req: SimRequest, reply: Reply) -> Reply:
    if not reply.tool_calls:
        return reply
    return Reply(content="I cannot look that up, but I would guess the answer is unknown.")


@flawed("flawed-wrong-tool")
def _wrong_tool(req: SimRequest, reply: Reply) -> Reply:
    if not reply.tool_calls:
        return reply
    used = {c.name for c in reply.tool_calls}
    others = [t for t in req.tools if (t.get("function") or {}).get("name") not in used]
    if not others:
        return reply  # only one tool on offer: no wrong tool to pick, the oracle's answer stands
    tool = others[0]
    return Reply(tool_calls=(SimCall(tool["function"]["name"], dumps(example_arguments(tool))),))


# What a model calls when it reaches for a tool it was not offered: a shell is the usual one.
UNKNOWN_TOOL = "run_shell"


@flawed("flawed-unknown-tool")
def _unknown_tool(req: SimRequest, reply: Reply) -> Reply:
    if not reply.tool_calls:
        return reply
    first, *rest = reply.tool_calls
    offered = set(req.tool_names)
    name = next(n for n in (UNKNOWN_TOOL, *(f"{UNKNOWN_TOOL}_{i}" for i in range(2, 99))) if n not in offered)
    return Reply(tool_calls=(SimCall(name, first.arguments), *rest))


@flawed("flawed-call-limit")
def _call_limit(req: SimRequest, reply: Reply) -> Reply:
    test = req.test
    if test is None or not test.multi_turn or not test.reference.turns:
        return reply
    calls = [c for turn in test.reference.turns for c in turn]
    loop = next((c for c in calls if c.name in READ_ONLY_TOOLS), calls[0])
    return Reply(tool_calls=(SimCall(loop.name, dumps(dict(loop.arguments))),))


@flawed("flawed-patch-failed")
def _patch_failed(req: SimRequest, reply: Reply) -> Reply:
    if not any(c.name in EDIT_TOOLS for c in reply.tool_calls):
        return reply
    return Reply(tool_calls=tuple(_unappliable(c) if c.name in EDIT_TOOLS else c for c in reply.tool_calls))


@flawed("flawed-bad-edit")
def _bad_edit(req: SimRequest, reply: Reply) -> Reply:
    if not any(c.name in EDIT_TOOLS for c in reply.tool_calls):
        return reply
    return Reply(tool_calls=tuple(_breaking(c) if c.name in EDIT_TOOLS else c for c in reply.tool_calls))


@flawed("flawed-wrong-args")
def _wrong_args(req: SimRequest, reply: Reply) -> Reply:
    # Workspace tasks are judged by their files: a wrong argument there becomes a failed edit, another failure type.
    if not reply.tool_calls or (req.test is not None and req.test.workspace is not None):
        return reply
    first, *rest = reply.tool_calls
    args = orjson.loads(first.arguments)
    if not isinstance(args, dict) or not args:
        return reply
    key = next(iter(args))
    args[key] = _wrong_value(args[key])
    return Reply(tool_calls=(SimCall(first.name, dumps(args)), *rest))


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + " (unverified)" if value else "unknown"
    if isinstance(value, list):
        return value[:-1] if value else ["unknown"]
    if isinstance(value, dict):
        return {}
    return "unknown"


_NO_MATCH = "this text is not in the file (sim: flawed edit)"


def _object_args(call: SimCall) -> dict[str, Any] | None:
    """The call's arguments when they are a JSON object (a reference edit), else None: nothing to distort."""
    try:
        args = orjson.loads(call.arguments)
    except orjson.JSONDecodeError:
        return None
    return args if isinstance(args, dict) else None


def _unappliable(call: SimCall) -> SimCall:
    """The same edit aimed at text that is not there, so the tool refuses it."""
    args = _object_args(call)
    if args is None:
        return call
    if call.name == "apply_patch":
        key = next((k for k, v in args.items() if isinstance(v, str) and "@@" in v), None) or "patch"
        path = next((v for k, v in args.items() if k != key and isinstance(v, str)), None)
        target = path or _patched_path(str(args.get(key, ""))) or "README.md"
        args[key] = f"--- a/{target}\n+++ b/{target}\n@@ -1,1 +1,1 @@\n-{_NO_MATCH}\n+{_NO_MATCH} (fixed)\n"
    else:
        old_key = next((k for k in args if "old" in k.lower() or k.lower() in ("search", "find")), None)
        if old_key is None:
            return call
        args[old_key] = _NO_MATCH
    return SimCall(call.name, dumps(args))


def _breaking(call: SimCall) -> SimCall:
    """The same edit with a line that breaks the program appended to what it inserts."""
    args = _object_args(call)
    if args is None:
        return call
    if call.name == "apply_patch":
        key = next((k for k, v in args.items() if isinstance(v, str) and "@@" in v), None)
        if key is None:
            return call
        lines = args[key].splitlines(keepends=True)
        last_plus = max(
            (i for i, line in enumerate(lines) if line.startswith("+") and not line.startswith("+++")), default=None
        )
        if last_plus is None:
            return call
        lines.insert(last_plus + 1, "+raise SystemExit('sim: broken edit')\n")
        args[key] = "".join(lines)
        args[key] = _fix_hunk_counts(args[key])
    else:
        key = next((k for k in args if "new" in k.lower() or k.lower() in ("replace", "replacement")), None)
        if key is None:
            return call
        args[key] = str(args[key]) + "\nraise SystemExit('sim: broken edit')\n"
    return SimCall(call.name, dumps(args))


def _patched_path(patch: str) -> str | None:
    for line in patch.splitlines():
        if line.startswith("+++ "):
            name = line[4:].strip()
            return name[2:] if name.startswith("b/") else name
    return None


def _fix_hunk_counts(patch: str) -> str:
    """Recount each hunk's new-side length after a line was added, so the patch stays well formed."""
    out: list[str] = []
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("@@"):
            j = i + 1
            new = 0
            while j < len(lines) and not lines[j].startswith("@@") and not lines[j].startswith("--- "):
                if lines[j].startswith((" ", "+")) or lines[j] in ("\n",):
                    new += 1
                j += 1
            head, _, tail = line.partition("+")
            start = tail.split(" ", 1)[0].split(",", 1)[0]
            rest = tail.split(" ", 1)[1] if " " in tail else "@@\n"
            out.append(f"{head}+{start},{new} {rest}")
            i += 1
            continue
        out.append(line)
        i += 1
    return "".join(out)
