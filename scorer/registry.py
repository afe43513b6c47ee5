"""The evaluator registry: `@evaluator` over pure scoring functions whose signature declares their arguments.

An evaluator is `fn(ctx: EvalContext, *, arg: Type = default, ...) -> Score` with a docstring saying what it scores
(scorer/signature.py). The registry derives from the signature everything that once was declared beside it: the JSON
Schema the catalog and rules loaders check `args` against, the validation and coercion of a check's arguments when it
is scored (unknown, missing or mistyped → a BenchError naming the test and the check), and the docs tables
(scorer/evaluator_docs.py). Bumping `version` marks a change in what an evaluator decides; it changes the scorer
version and shows up as flips.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeVar

import jsonschema
import msgspec

from bench.scorer.context import EvalContext
from bench.scorer.signature import (
    REQUIRED,
    Param,
    args_struct,
    doc_summary,
    explain,
    json_schema,
    names_tool,
    params_of,
)

__all__ = [
    "EVALUATORS",
    "REQUIRED",
    "ArgError",
    "EvalContext",
    "Evaluator",
    "Score",
    "arg_problem",
    "evaluator",
]

# "error": the check could not be decided here (the code sandbox is unavailable); it counts in no score.
ScoreStatus = Literal["scored", "skipped", "error"]


@dataclass(frozen=True)
class Score:
    score: float
    detail: str = ""
    status: ScoreStatus = "scored"

    @classmethod
    def of(cls, ok: bool, detail: str = "") -> Score:
        return cls(1.0 if ok else 0.0, detail)

    @classmethod
    def skipped(cls, why: str) -> Score:
        return cls(0.0, why, "skipped")

    @classmethod
    def error(cls, why: str) -> Score:
        """The check could not be evaluated (the evaluator raised, ran out of time, or could not start its
        sandbox): no verdict on the model, and the result is not scored."""
        return cls(0.0, why, "error")


class ArgError(ValueError):
    """A check's arguments have the right names but an unusable value (bad regex, wrong type)."""


EvalFn = Callable[..., Score]
F = TypeVar("F", bound=EvalFn)


@dataclass(frozen=True)
class Evaluator:
    name: str
    version: int
    fn: EvalFn
    # The keyword-only parameters of `fn`, in signature order.
    params: tuple[Param, ...]
    # Groups of arguments of which exactly one must be given (file_contains: value or regex).
    one_of: tuple[tuple[str, ...], ...] = ()
    # Checks that read the workspace's final state (a rules file has no workspace to give them).
    needs_workspace: bool = False
    # The module that defines it, without the package: the docs group evaluators by it.
    group: str = ""
    doc: str = ""
    _args_type: type[msgspec.Struct] = field(init=False, repr=False, compare=False)
    # Arguments already bound, by the identity of the check's args mapping: a catalog's check is scored once per
    # result with the same mapping, and binding it again was ~2% of a rescore. Only all-immutable bindings are kept
    # (an evaluator never shares a list or dict with the next result's call).
    _bound: dict[int, tuple[Mapping[str, Any], dict[str, Any], dict[str, Any]]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_args_type", args_struct(self.name, self.params))
        object.__setattr__(self, "_bound", {})

    @cached_property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the check's `args` object."""
        return json_schema(self.name, self.params, self.doc)

    @property
    def tool_args(self) -> tuple[str, ...]:
        """The arguments whose value names one of the test's tools."""
        return tuple(p.name for p in self.params if names_tool(p.type))

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments validated, coerced to their declared types, defaults filled; raises ArgError on a problem."""
        params = {p.name: p for p in self.params}
        unknown = sorted(set(args) - set(params))
        if unknown:
            allowed = ", ".join(sorted(params)) or "none"
            raise ArgError(f"unknown argument(s) {', '.join(unknown)} (allowed: {allowed})")
        missing = [p.name for p in self.params if p.default is REQUIRED and p.name not in args]
        if missing:
            raise ArgError(f"missing argument(s) {', '.join(sorted(missing))}")
        for group in self.one_of:
            if sum(1 for k in group if args.get(k) is not None) != 1:
                raise ArgError(f"give exactly one of {', '.join(group)}")
        try:
            bound = msgspec.convert(dict(args), self._args_type)
        except msgspec.ValidationError as exc:
            raise ArgError(explain(exc, params, args)) from None
        return {p.name: getattr(bound, p.name) for p in self.params}

    def __call__(self, ctx: EvalContext, args: Mapping[str, Any]) -> Score:
        kept = self._bound.get(id(args))
        # The mapping itself is held (its id cannot be reused) and its contents compared (it cannot have changed).
        if kept is not None and kept[0] is args and kept[1] == args:
            return self.fn(ctx, **kept[2])
        bound = self.bind(args)
        if all(isinstance(v, _IMMUTABLE) for v in bound.values()):
            if len(self._bound) >= BOUND_KEPT:
                self._bound.clear()
            self._bound[id(args)] = (args, dict(args), bound)
        return self.fn(ctx, **bound)


_IMMUTABLE = (str, int, float, bool, bytes, type(None))
BOUND_KEPT = 256  # bindings kept per evaluator (a catalog's checks of it); past this they start again


EVALUATORS: dict[str, Evaluator] = {}


def evaluator(
    name: str | None = None,
    version: int = 1,
    *,
    one_of: Iterable[tuple[str, ...]] = (),
    needs_workspace: bool = False,
) -> Callable[[F], F]:
    """Register `fn` under `name` (default: the function's name); its signature and docstring declare it."""

    def register(fn: F) -> F:
        key = name or fn.__name__
        if key in EVALUATORS:
            raise RuntimeError(f"evaluator {key!r} registered twice")
        params = params_of(fn)
        groups = tuple(tuple(g) for g in one_of)
        declared = {p.name for p in params}
        for group in groups:
            if not set(group) <= declared:
                raise TypeError(f"evaluator {key}: one_of names {group} that are not all arguments")
        EVALUATORS[key] = Evaluator(
            name=key,
            version=version,
            fn=fn,
            params=params,
            one_of=groups,
            needs_workspace=needs_workspace,
            group=fn.__module__.rsplit(".", 1)[-1],
            doc=doc_summary(fn),
        )
        return fn

    return register


def arg_problem(ev: Evaluator, args: Mapping[str, Any]) -> tuple[list[str | int], str] | None:
    """(path inside args, message) for arguments a check cannot be scored with, else None: the catalog's and the
    rules file's load-time check (the JSON Schema's messages first, then what a schema cannot say, like one_of)."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(ev.schema).iter_errors(args))
    if error is not None:
        return list(error.absolute_path), error.message
    try:
        ev.bind(args)
    except ArgError as exc:
        return [], str(exc)
    return None
