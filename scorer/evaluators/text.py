"""Text evaluators over the final assistant text."""

from __future__ import annotations

import re

from bench.scorer.registry import ArgError, EvalContext, Score, evaluator
from bench.scorer.signature import Strings

_FENCE = re.compile(r"^```[\w+-]*\s*\n?(.*?)\n?```$", re.DOTALL)
_DECORATION = "\"'`“”‘’«»*"
# Words that negate what follows within the same clause ("not Paris", "isn't Paris", "never X").
_NEGATIONS = frozenset(
    ("not", "no", "never", "neither", "nor", "without", "cannot", "hardly", "isn't", "aren't", "wasn't", "weren't")
)
# A clause ends at one of these characters or at the word "but" or "however".
_CLAUSE_MARKS = ".;:!?,\n"
_CLAUSE_WORD = re.compile(r"\bbut\b|\bhowever\b", re.IGNORECASE)
_WORD = re.compile(r"[\w']+")
# The last four words of a clause lie in its last characters; a longer tail only costs time.
_WORDS_TAIL = 256


def _fold(s: str, case_sensitive: bool) -> str:
    return s if case_sensitive else s.casefold()


def short(s: str, n: int = 60) -> str:
    s = s.strip().replace("\n", " ")
    return repr(s if len(s) <= n else s[: n - 1] + "…")


def _unwrap(s: str) -> str:
    s = s.strip()
    while len(s) >= 2 and s[0] in _DECORATION and s[-1] in _DECORATION:
        s = s[1:-1].strip()
    return s


def strip_token(text: str) -> str:
    """The bare answer: no surrounding code fence, quotes, bold/italics or backticks, and at most one final period."""
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1)
    s = _unwrap(s)
    if s.endswith("."):
        s = _unwrap(s[:-1])
    return s


@evaluator("equals")
def equals(ctx: EvalContext, *, value: str, case_sensitive: bool = False) -> Score:
    """trimmed text equals value"""
    ok = _fold(ctx.text.strip(), case_sensitive) == _fold(value.strip(), case_sensitive)
    return Score.of(ok, "equal" if ok else f"{short(ctx.text)} != {short(value)}")


@evaluator("exact_token")
def exact_token(ctx: EvalContext, *, value: str) -> Score:
    """after removing a surrounding code fence, quotes, backticks, bold/italic `*`, and one trailing period, equals
    value exactly"""
    got = strip_token(ctx.text)
    ok = got == value.strip()
    return Score.of(ok, "exact" if ok else f"{short(got)} != {short(value)}")


@evaluator("contains_all")
def contains_all(ctx: EvalContext, *, values: Strings, case_sensitive: bool = False) -> Score:
    """share of values present (partial credit)"""
    text = _fold(ctx.text, case_sensitive)
    missing = [v for v in values if _fold(v, case_sensitive) not in text]
    score = (len(values) - len(missing)) / len(values)
    return Score(score, "all present" if not missing else f"missing {', '.join(map(repr, missing))}")


def _present(ctx: EvalContext, values: list[str], case_sensitive: bool) -> list[str]:
    """The `values` that occur in the answer, in argument order."""
    text = _fold(ctx.text, case_sensitive)
    return [v for v in values if _fold(v, case_sensitive) in text]


@evaluator("contains_any")
def contains_any(ctx: EvalContext, *, values: Strings, case_sensitive: bool = False) -> Score:
    """1 if any is present"""
    found = _present(ctx, values, case_sensitive)
    return Score.of(bool(found), f"found {found[0]!r}" if found else "none of the values present")


@evaluator("contains_none")
def contains_none(ctx: EvalContext, *, values: Strings, case_sensitive: bool = False) -> Score:
    """1 if none is present"""
    found = _present(ctx, values, case_sensitive)
    return Score.of(not found, f"contains {', '.join(map(repr, found))}" if found else "none present")


@evaluator("regex")
def regex(ctx: EvalContext, *, pattern: str, ignore_case: bool = False) -> Score:
    """`re.search` matches"""
    try:
        compiled = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ArgError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    m = compiled.search(ctx.text)
    return Score.of(m is not None, f"matched {short(m.group(0))}" if m else f"no match for /{pattern}/")


def last_clause(text: str) -> str:
    """The text after the last clause break. Found backwards from the end (the last mark by C-level rfind, then
    the words of that last stretch only), so a mention late in a long answer costs its clause, not the answer."""
    after_mark = max(map(text.rfind, _CLAUSE_MARKS)) + 1
    stretch = text[after_mark:]
    low = stretch.lower()  # no other character matches these letters case-insensitively: an exact pre-check
    if "but" not in low and "however" not in low:
        return stretch
    ends = [m.end() for m in _CLAUSE_WORD.finditer(stretch)]
    return stretch[ends[-1] :] if ends else stretch


def _words(text: str) -> list[str]:
    words: list[str] = _WORD.findall(text.casefold().replace("’", "'"))
    return words


def is_negated(prefix: str) -> bool:
    """Whether the clause leading up to a mention negates it (looks back at most four words)."""
    clause = last_clause(prefix)
    words = _words(clause[-_WORDS_TAIL:])
    if len(words) <= 4 and len(clause) > _WORDS_TAIL:
        words = _words(clause)  # the cut may have split one of the last four words
    return any(w in _NEGATIONS or w.endswith("n't") for w in words[-4:])


def whole_word(value: str) -> re.Pattern[str]:
    r"""`value` as a whole word, any case: `(?<!\w)value(?!\w)`, with the look-behind moved after the first character
    (`v(?<!\w.)alue`): a pattern that starts with a character lets the regex engine skip ahead to where that
    character is, where one that starts with a look-behind tries every position (2.6x slower over a 2,000-character
    answer). The same matches: the first character is never a newline (`value` is stripped), so `.` is it."""
    return re.compile(re.escape(value[0]) + r"(?<!\w.)" + re.escape(value[1:]) + r"(?!\w)", re.IGNORECASE)


@evaluator("mentions")
def mentions(ctx: EvalContext, *, value: str) -> Score:
    """the value occurs as a whole word at least once without a negation (not, no, never, n't, without…) among the
    four words before it in the same clause"""
    value = value.strip()
    if not value:
        raise ArgError("value must not be empty")
    text = ctx.text
    pattern = whole_word(value)
    hits = list(pattern.finditer(text))
    if not hits:
        return Score(0.0, f"{value!r} not mentioned")
    for m in hits:
        if not is_negated(text[: m.start()]):
            return Score(1.0, f"{value!r} mentioned")
    return Score(0.0, f"{value!r} only mentioned negated")
