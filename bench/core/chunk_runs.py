"""Chat Completions streams' runs (bench.core.event_runs): which field of a chunk a run's string fills, proved.

The run's template is decoded with two different strings in its hole; each decode must hold its own string in the
same field: the delta's content, reasoning_content, or the arguments of its one tool-call fragment. A paired run's
second string (OpenAI's `obfuscation`) must be one the chunk ignores: another string or a number in its place decodes
to the same chunk. Then every read
of the run is that chunk with its string in that field, and the parser folds the run without building a chunk per
read (bench.core.parse, `_Fold.run`). A template the bulk fold does not cover (several choices, an error or usage in
every read, a fragment that names a call) gives no run.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.core.chunks import Chunk, decode_chunk
from bench.core.event_runs import Run, find_run, ignores_other

CONTENT, REASONING_CONTENT, ARGUMENTS = 1, 2, 3
_HEAD, _TAIL = b"data: ", b"\n\n"


def chat_run(reads: Sequence[bytes]) -> tuple[Run, Chunk, int] | None:
    """The stream's run, its chunk (with the string "A" in the hole) and which field the hole is, or None."""
    run = find_run(reads, _HEAD, _TAIL)
    if run is None:
        return None
    a = decode_chunk(run.template(b'"A"', len(_HEAD), len(_TAIL)))
    b = decode_chunk(run.template(b'"B"', len(_HEAD), len(_TAIL)))
    if a is None or b is None:
        return None
    hole = _hole(a, "A")
    # The bytes around the hole are the same in both, so only the hole's field can differ: each decode holding its
    # own string there, and every other field being one the bulk fold covers, is the whole proof.
    if hole is None or _hole(b, "B") != hole:
        return None
    if run.rest is not None and not ignores_other(run, decode_chunk, a, len(_HEAD), len(_TAIL)):
        return None
    return run, a, hole


def _hole(chunk: Chunk, value: str) -> int | None:
    """Which field holds `value`, in a chunk the bulk fold covers (one choice with index 0 and a delta; no error, no
    usage; no legacy function_call; what else the delta holds fits the field), or None."""
    if chunk.error or chunk.usage or not chunk.choices or len(chunk.choices) != 1:
        return None
    choice = chunk.choices[0]
    delta = choice.delta
    if choice.index != 0 or delta is None or delta.function_call is not None or delta.reasoning is not None:
        return None
    calls = delta.tool_calls
    if delta.content == value and not calls and not delta.reasoning_content:
        return CONTENT
    if delta.reasoning_content == value and not calls and not delta.content:
        return REASONING_CONTENT
    if calls and len(calls) == 1 and not delta.content and not delta.reasoning_content:
        frag = calls[0]
        fn = frag.function
        if fn is not None and fn.arguments == value and frag.id is None and frag.type is None and fn.name is None:
            return ARGUMENTS
    return None
