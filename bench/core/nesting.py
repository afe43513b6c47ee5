"""Depth limits for nested user input (catalog YAML, configs, JSON answers and schemas).

Python's YAML and JSON parsers, jsonschema and json.dumps recurse once per level or more: input nested a few
thousand deep (an accident or an attack) raises RecursionError, a traceback instead of a message. Documents are
checked here, without recursion, before anything recursive walks them; the parsers' own RecursionError is turned
into the same one-line message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

# Far deeper than any real catalog, config or answer, and shallow enough for every recursive consumer (jsonschema
# uses several frames per level of a document) to stay well inside Python's default recursion limit of 1000.
MAX_DEPTH = 100


class TooDeep(ValueError):
    """Input nested deeper than MAX_DEPTH levels (or than a parser could follow)."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"nested more than {limit} levels deep")


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and mappings inside `value` go more than `limit` levels deep (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def check_depth(value: Any, limit: int = MAX_DEPTH) -> Any:
    """`value`, or TooDeep."""
    if depth_exceeds(value, limit):
        raise TooDeep(limit)
    return value


# libyaml's parser when PyYAML was built with it (about 9x faster on the built-in catalog: every `bench` command reads
# it), else PyYAML's own; both take the Python resolver and constructor below, so both read a document the same way.
_Parser: Any = getattr(yaml, "CSafeLoader", None) if yaml.__with_libyaml__ else None


class _JsonValuesLoader(_Parser or yaml.SafeLoader):  # type: ignore[misc]
    """safe_load's rules without YAML 1.1's timestamps: an unquoted `2024-01-05` stays the text it is. Every value a
    catalog, a rules file or a config compares with comes from JSON (a model's answer, a request), which has no date
    type, so a date read as `datetime.date` could never equal anything (and jsonschema does not know its type)."""


_JsonValuesLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

# How many values aliases may add to a document beyond those written in it: anchors let a few lines stand for an
# exponential number of values ("billion laughs"), which every later walk of the document would visit.
MAX_ALIASED_VALUES = 100_000


def _check_events(text: str) -> None:
    """TooDeep, or a YAMLError naming the line, for a document nested past MAX_DEPTH (aliases counted at the depth
    they are used), aliased past MAX_ALIASED_VALUES or holding an alias inside the collection it names; found from
    the parser's events, without recursion and before anything builds the document (building it recurses once per
    level, in C for libyaml)."""
    # Per open collection: [height below it, values in it]; per anchor: (height, values) once its node is whole.
    open_: list[list[int]] = [[0, 0]]
    anchors: dict[str, tuple[int, int]] = {}
    names: list[str | None] = []
    aliased = 0
    events: Iterator[Any] = yaml.parse(text, Loader=_JsonValuesLoader)  # Any: libyaml's marks are not yaml.Mark
    for event in events:
        kind = type(event)
        if kind is yaml.ScalarEvent:
            open_[-1][1] += 1
            if event.anchor is not None:
                anchors[event.anchor] = (0, 1)
        elif kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
            if len(open_) > MAX_DEPTH:
                raise TooDeep()
            open_.append([0, 1])
            names.append(event.anchor)
        elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
            height, values = open_.pop()
            name = names.pop()
            if name is not None:
                anchors[name] = (height + 1, values)
            _add(open_[-1], height + 1, values)
        elif kind is yaml.AliasEvent:
            whole = anchors.get(event.anchor)
            if whole is None:
                # Undefined (the constructor names that error) or still open: a document that contains itself.
                if event.anchor in names:
                    raise yaml.MarkedYAMLError(
                        problem=f"alias *{event.anchor} is inside the collection it names: write the values out",
                        problem_mark=event.start_mark,
                    )
                continue
            height, values = whole
            if len(open_) - 1 + height > MAX_DEPTH:
                raise TooDeep()
            aliased += values
            if aliased > MAX_ALIASED_VALUES:
                raise yaml.MarkedYAMLError(
                    problem=f"aliases repeat more than {MAX_ALIASED_VALUES} values: write the values out",
                    problem_mark=event.start_mark,
                )
            _add(open_[-1], height, values)


def _add(parent: list[int], height: int, values: int) -> None:
    parent[0] = max(parent[0], height)
    parent[1] += values


def load_yaml(text: str) -> Any:
    """yaml.safe_load, dates kept as text, with a depth limit and a bound on what aliases repeat: TooDeep instead of
    RecursionError (yaml.YAMLError as usual, and for aliases past the bound)."""
    try:
        _check_events(text)
        return yaml.load(text, Loader=_JsonValuesLoader)
    except RecursionError:
        raise TooDeep() from None
    except yaml.MarkedYAMLError as exc:
        # libyaml stops at 1000 levels itself (its scanner runs ahead of the events, so past MAX_DEPTH it can be
        # first): the same input, the same message as from the pure-Python parser.
        if exc.problem is not None and "maximum nesting depth" in exc.problem:
            raise TooDeep() from None
        raise
