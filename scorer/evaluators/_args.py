"""Typed access to check arguments: a wrong type is the catalog's mistake and raises ArgError."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorer.registry import ArgError


def string(args: Mapping[str, Any], key: str) -> str:
    value = args[key]
    if not isinstance(value, str):
        raise ArgError(f"{key} must be a string, not {type(value).__name__}")
    return value


def strings(args: Mapping[str, Any], key: str) -> list[str]:
    value = args[key]
    if isinstance(value, str) or not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ArgError(f"{key} must be a list of strings")
    return list(value)


def number(args: Mapping[str, Any], key: str) -> float:
    value = args[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgError(f"{key} must be a number, not {type(value).__name__}")
    return float(value)


def optional_int(args: Mapping[str, Any], key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgError(f"{key} must be an integer")
    return value


def flag(args: Mapping[str, Any], key: str) -> bool:
    value = args[key]
    if not isinstance(value, bool):
        raise ArgError(f"{key} must be true or false")
    return value
