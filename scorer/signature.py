"""An evaluator's signature is its declaration: what the registry, the catalog and the docs derive from it.

An evaluator is `fn(ctx, *, arg: Type = default, ...) -> Score`. Its keyword-only parameters are the check's
arguments: a parameter without a default is required, `X | None = None` is optional with no value, and constraints
ride on the type (`Annotated[float, msgspec.Meta(gt=0)]`, `Literal[...]` for a closed set). From the parameters come a
msgspec Struct (validation and coercion of a check's `args`), the JSON Schema the catalog and rules loaders validate
against, and the argument columns of the docs tables. The aliases below are the argument types shared by evaluators.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import msgspec

# Marks a string (or each string of a list) that must name one of the test's tools; the catalog loader checks it.
_NAMES_TOOL = {"names_tool": True}

Strings = Annotated[list[str], msgspec.Meta(min_length=1)]
Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=0)]
ToolName = Annotated[str, msgspec.Meta(extra=_NAMES_TOOL)]
ToolNames = Annotated[list[ToolName], msgspec.Meta(min_length=1)]
JsonObject = Annotated[dict[str, Any], msgspec.Meta(title="a JSON Schema object")]
Matchers = Annotated[dict[str, Any], msgspec.Meta(min_length=1, title="a map of argument names to matchers")]
Argv = Annotated[list[str], msgspec.Meta(min_length=1, title="a non-empty list of strings (argv)")]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Param:
    name: str
    type: Any
    default: Any  # REQUIRED when the argument has none


def params_of(fn: Callable[..., Any]) -> tuple[Param, ...]:
    """The keyword-only parameters after the context; anything else in the signature is a programming error."""
    hints = typing.get_type_hints(fn, include_extras=True)
    sig = inspect.signature(fn)
    positional = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    if len(positional) != 1:
        raise TypeError(f"evaluator {fn.__name__}: takes the context, then keyword-only arguments (after `*`)")
    params = []
    for p in sig.parameters.values():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        if p.name not in hints:
            raise TypeError(f"evaluator {fn.__name__}: argument {p.name} has no type annotation")
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        params.append(Param(p.name, hints[p.name], default))
    return tuple(params)


def args_struct(name: str, params: tuple[Param, ...]) -> type[msgspec.Struct]:
    fields = [(p.name, p.type) if p.default is REQUIRED else (p.name, p.type, p.default) for p in params]
    return msgspec.defstruct(name, fields, kw_only=True, forbid_unknown_fields=True)


def _strip(annotation: Any) -> tuple[Any, list[msgspec.Meta]]:
    """The bare type and the msgspec Meta riding on it (Python flattens nested Annotated into one)."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation, []
    return annotation.__origin__, [m for m in annotation.__metadata__ if isinstance(m, msgspec.Meta)]


def _optional(annotation: Any) -> Any | None:
    """X for `X | None`, else None."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1 and len(typing.get_args(annotation)) == 2:
            return rest[0]
    return None


def names_tool(annotation: Any) -> bool:
    """Whether the argument's value (a string, or each of a list) must name one of the test's tools."""
    annotation = _optional(annotation) or annotation
    bare, metas = _strip(annotation)
    if any((m.extra or {}).get("names_tool") for m in metas):
        return True
    return typing.get_origin(bare) is list and names_tool(typing.get_args(bare)[0])


def json_schema(name: str, params: tuple[Param, ...], description: str) -> dict[str, Any]:
    """The JSON Schema (2020-12) of the check's `args` object."""
    components = msgspec.json.schema_components([args_struct(name, params)])[1]
    # msgspec gives a Struct: title, type, properties, required (possibly empty), additionalProperties.
    schema: dict[str, Any] = components.pop(name)
    del schema["title"]
    for p in params:
        if p.default is None and _optional(p.type) is not None:
            # Omitting the argument means "none"; an explicit null in the YAML is refused, as a typo would be.
            schema["properties"][p.name] = next(o for o in schema["properties"][p.name]["anyOf"] if o != _NULL)
    if description:
        schema["description"] = description
    if components:
        schema["$defs"] = components
    return schema


_NULL = {"type": "null"}


_PHRASES: dict[Any, tuple[str, str]] = {
    # type -> (what an error says it must be, what the docs call it)
    str: ("a string", "string"),
    float: ("a number", "number"),
    int: ("an integer", "integer"),
    bool: ("true or false", "boolean"),
    Any: ("any value", "any"),
}


def _describe(annotation: Any, index: int) -> str:
    annotation = _optional(annotation) or annotation
    bare, metas = _strip(annotation)
    if index == 1 and metas:
        return _constrained(_describe(bare, 1), metas)
    titles = [m.title for m in metas if m.title]
    if titles:
        return titles[-1]
    if bare in _PHRASES:
        return _PHRASES[bare][index]
    origin = typing.get_origin(bare)
    if origin is Literal:
        values = ", ".join(repr(v) for v in typing.get_args(bare))
        return f"one of {values}" if index == 0 else " \\| ".join(repr(v) for v in typing.get_args(bare))
    if origin is list:
        item = _describe(typing.get_args(bare)[0], 1)
        return f"a list of {item}s" if index == 0 else f"list of {item}s"
    if origin is dict:
        return "an object" if index == 0 else "object"
    return getattr(bare, "__name__", str(bare))


def _constrained(name: str, metas: list[msgspec.Meta]) -> str:
    """`list of strings` → `non-empty list of strings`, `number` → `number > 0`, as the docs show a constraint."""
    for m in metas:
        if m.min_length == 1:
            name = f"non-empty {name}"
        for bound, sign in ((m.gt, ">"), (m.ge, "≥"), (m.lt, "<"), (m.le, "≤")):
            if bound is not None:
                name = f"{name} {sign} {bound:g}"
    return name


def must_be(annotation: Any) -> str:
    """What an error message says the value must be: "a string", "a list of strings", ..."""
    return _describe(annotation, 0)


def type_name(annotation: Any) -> str:
    """The argument's type as the catalog docs name it: string, number, list of strings, ..."""
    return _describe(annotation, 1)


_AT = re.compile(r" - at `\$\.(\w+)([^`]*)`$")


def explain(exc: msgspec.ValidationError, params: Mapping[str, Param], args: Mapping[str, Any]) -> str:
    """A msgspec validation error as a one-line fix: `value must be a string, not int`."""
    message = str(exc)
    m = _AT.search(message)
    if m is None or m.group(1) not in params:
        return message.replace("`", "")
    key = m.group(1)
    what = message[: m.start()]
    if ", got `" in what:
        got = "" if m.group(2) else f", not {type(args.get(key)).__name__}"
        return f"{key} must be {must_be(params[key].type)}{got}"
    what = what.replace("`", "")
    return f"{key}: {what[0].lower()}{what[1:]}"


def doc_summary(fn: Callable[..., Any]) -> str:
    """The docstring as one line (the docs tables' "scores" column and the schema's description)."""
    return " ".join((inspect.getdoc(fn) or "").split())
