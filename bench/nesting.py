"""Depth limits for nested user input (catalog YAML, configs, JSON answers and schemas).

Python's YAML and JSON parsers, jsonschema and json.dumps recurse once per level or more: input nested a few
thousand deep (an accident or an attack) raises RecursionError, a traceback instead of a message. Documents are
checked here, without recursion, before anything recursive walks them; the parsers' own RecursionError is turned
into the same one-line message.
"""

from __future__ import annotations

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


class _JsonValuesLoader(yaml.SafeLoader):
    """safe_load's rules without YAML 1.1's timestamps: an unquoted `2024-01-05` stays the text it is. Every value a
    catalog, a rules file or a config compares with comes from JSON (a model's answer, a request), which has no date
    type, so a date read as `datetime.date` could never equal anything (and jsonschema does not know its type)."""


_JsonValuesLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str) -> Any:
    """yaml.safe_load, dates kept as text, with a depth limit: TooDeep instead of RecursionError (yaml.YAMLError as
    usual)."""
    try:
        data = yaml.load(text, Loader=_JsonValuesLoader)
    except RecursionError:
        raise TooDeep() from None
    return check_depth(data)
