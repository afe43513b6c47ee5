"""The word-level difference of two answers (the two sides of a flip), with the standard library's difflib."""

from __future__ import annotations

import difflib
import re

import msgspec

# Words, runs of whitespace and single other characters: joined back, the pieces are the text exactly.
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")
# Tokens compared at most per side: difflib's matcher is quadratic in the worst case (a hostile answer of one word
# repeated), and a page of more differences than this is not read word by word anyway.
MAX_TOKENS = 4000


class Piece(msgspec.Struct):
    op: str  # same | gone (only in a) | new (only in b)
    text: str


def word_diff(a: str, b: str) -> tuple[list[Piece], str | None]:
    """The pieces, in order, and a note when the texts were longer than what was compared."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    note = None
    if len(ta) > MAX_TOKENS or len(tb) > MAX_TOKENS:
        note = f"the answers are compared over their first {MAX_TOKENS:,} words and spaces; the rest is left out"
        ta, tb = ta[:MAX_TOKENS], tb[:MAX_TOKENS]
    pieces: list[Piece] = []

    def add(op: str, text: str) -> None:
        if not text:
            return
        if pieces and pieces[-1].op == op:
            pieces[-1].text += text
        else:
            pieces.append(Piece(op, text))

    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=True)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            add("same", "".join(ta[i1:i2]))
        else:
            add("gone", "".join(ta[i1:i2]))
            add("new", "".join(tb[j1:j2]))
    return pieces, note
