"""The numeric evaluator and the extraction of "the answer's number" from free text.

Extraction order: the last `\\boxed{…}`, then a `####` line (GSM8K style), then the first number after the last
answer marker ("answer is", "answer:", "result:", "="), else the last number in the text. Numbers may carry a sign
(ASCII or Unicode minus), thousands separators, a decimal part, an exponent, a currency sign or a percent sign, or be
a simple fraction (3/4).
"""

from __future__ import annotations

import math
import re

from bench.scorer.registry import ArgError, EvalContext, Score, evaluator

_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+−]?)[$€£]?\s?"
    r"(?:(?P<num>\d+)\s*/\s*(?P<den>\d+)(?![\d/]|[.,]\d)"
    r"|(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?:[eE](?P<exp>[-+]?\d+))?|(?P<bare>\.\d+))"
)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_HASHES = re.compile(r"^\s*####\s*(.*)$", re.MULTILINE)
_MARKER = re.compile(r"(?:answer\s*(?:is|:|=)|result\s*(?:is|:|=)|total\s*(?:is|:|=)|=)", re.IGNORECASE)


def _value(m: re.Match[str]) -> float:
    sign = -1.0 if m.group("sign") in ("-", "−") else 1.0
    if m.group("num") is not None:
        den = int(m.group("den"))
        return sign * (int(m.group("num")) / den if den else math.inf)
    if m.group("bare") is not None:
        return sign * float("0" + m.group("bare"))
    text = m.group("int").replace(",", "") + (m.group("frac") or "")
    if m.group("exp") is not None:
        text += "e" + m.group("exp")
    return sign * float(text)


def numbers_in(text: str) -> list[float]:
    return [_value(m) for m in _NUMBER.finditer(text)]


def extract_number(text: str) -> float | None:
    """The number that answers, per the order in the module docstring; None when the text holds no number."""
    boxed = _BOXED.findall(text)
    for candidate in reversed(boxed):
        found = numbers_in(candidate)
        if found:
            return found[-1]
    hashes = _HASHES.findall(text)
    if hashes:
        found = numbers_in(hashes[-1])
        if found:
            return found[0]
    markers = list(_MARKER.finditer(text))
    for marker in reversed(markers):
        m = _NUMBER.search(text, marker.end())
        if m is not None:
            return _value(m)
    found = numbers_in(text)
    return found[-1] if found else None


@evaluator("numeric")
def numeric(ctx: EvalContext, *, value: float, tolerance: float = 1e-6, relative: bool = False) -> Score:
    """the answer's number within tolerance (absolute, or × \\|value\\| when relative). The number: last `\\boxed{}`,
    else a `####` line, else the first number after the last "answer is/answer:/result:/total:/=", else the last
    number. Signs (also `−`), thousands commas, decimals, exponents, `$ € £`, `%`, simple fractions `3/4`"""
    if tolerance < 0:
        raise ArgError("tolerance must not be negative")
    got = extract_number(ctx.text)
    if got is None:
        return Score(0.0, "no number in the answer")
    allowed = tolerance * abs(value) if relative else tolerance
    ok = abs(got - value) <= allowed
    return Score.of(ok, f"{got:g} {'≈' if ok else '!='} {value:g}")
