"""Typed value comparison and the argument matchers of tool_args (the Berkeley Function Calling Leaderboard way:
compare structure and typed values, allow listed alternatives, normalise what has many spellings).

A literal compares by type: booleans only with booleans, numbers by value (3 == 3.0, never True == 1), strings
trimmed and case-folded, lists element-wise, objects key-wise. A matcher is a one-key object:
`{exact: v}` (strings must match exactly), `{contains: s}`, `{regex: p}` (search), `{one_of: [..]}` (any literal;
`null` in the list accepts an absent argument), `{path: p}` (normalised file path), `{any: true}` (present).
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from bench.scorer.registry import ArgError

MATCHER_KEYS = frozenset({"exact", "contains", "regex", "one_of", "path", "any"})


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def values_equal(got: Any, want: Any, *, strict_strings: bool = False) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if _is_number(want):
        return _is_number(got) and math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, str):
        if not isinstance(got, str):
            return False
        return got == want if strict_strings else got.strip().casefold() == want.strip().casefold()
    if want is None:
        return got is None
    if isinstance(want, list | tuple):
        return (
            isinstance(got, list | tuple)
            and len(got) == len(want)
            and all(values_equal(g, w, strict_strings=strict_strings) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, Mapping):
        return (
            isinstance(got, Mapping)
            and set(got) == set(want)
            and all(values_equal(got[k], want[k], strict_strings=strict_strings) for k in want)
        )
    return bool(got == want)


def normalize_path(p: str) -> str:
    """One spelling per workspace path: forward slashes, no `./`, no leading or trailing slash, `..` folded."""
    s = p.strip().replace("\\", "/")
    s = posixpath.normpath(s) if s else s
    s = s.lstrip("/")
    while s.startswith("./"):
        s = s[2:]
    return "" if s == "." else s


def is_matcher(spec: Any) -> bool:
    return isinstance(spec, Mapping) and len(spec) == 1 and next(iter(spec)) in MATCHER_KEYS


def match_value(present: bool, got: Any, spec: Any) -> tuple[bool, str]:
    """(matched, why-not) for one argument value against a literal or a matcher; why-not is "" when it matched
    (written only for a mismatch: the repr of a long argument cost more than the comparison)."""
    if not is_matcher(spec):
        if not present:
            return False, "missing"
        ok = values_equal(got, spec)
        return ok, "" if ok else f"{got!r} != {spec!r}"
    kind, want = next(iter(spec.items()))
    if kind == "one_of":
        if not isinstance(want, list | tuple):
            raise ArgError("one_of must be a list")
        if not present:
            return None in want, "missing"
        ok = any(values_equal(got, w) for w in want)
        return ok, "" if ok else f"{got!r} not one of {list(want)!r}"
    if not present:
        return False, "missing"
    if kind == "any":
        return True, ""
    if kind == "exact":
        ok = values_equal(got, want, strict_strings=True)
        return ok, "" if ok else f"{got!r} != {want!r}"
    if kind == "contains":
        if not isinstance(want, str):
            raise ArgError("contains must be a string")
        ok = isinstance(got, str) and want.casefold() in got.casefold()
        return ok, "" if ok else f"{got!r} does not contain {want!r}"
    if kind == "regex":
        if not isinstance(want, str):
            raise ArgError("regex must be a string")
        try:
            ok = isinstance(got, str) and re.search(want, got) is not None
        except re.error as exc:
            raise ArgError(f"regex {want!r} is invalid: {exc}") from None
        return ok, "" if ok else f"{got!r} does not match /{want}/"
    if not isinstance(want, str):
        raise ArgError("path must be a string")
    ok = isinstance(got, str) and normalize_path(got) == normalize_path(want)
    return ok, "" if ok else f"{got!r} is not the path {want!r}"
