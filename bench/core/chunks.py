"""The fields of an OpenAI `chat.completion.chunk` (and legacy completion chunk) that an answer is built from.

Decoded with msgspec into these structs, unknown fields are skipped instead of being built into dicts: that is most
of the work of parsing a recorded stream, which the scorer does for every event of every exchange. A chunk whose
fields have other types than a client expects is not a chunk a client could use: it fails to decode and is
reported as a bad event.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec


# gc=False: a decoded chunk only holds strings, numbers and other chunk parts, so it can never be part of a reference
# cycle; untracked, the hundreds allocated per stream cost the collector nothing (decode 5-10% faster).
class FunctionDelta(msgspec.Struct, gc=False):
    name: str | None = None
    # A string of JSON text by the API's definition; some servers send the object itself.
    arguments: Any = None


class ToolCallDelta(msgspec.Struct, gc=False):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: FunctionDelta | None = None


class Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None
    # OpenRouter-style reasoning text; some servers send an object, which is ignored.
    reasoning: Any = None
    tool_calls: list[ToolCallDelta] | None = None
    function_call: FunctionDelta | None = None


class Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: Delta | None = None
    text: str | None = None  # legacy completions stream
    finish_reason: str | None = None


class Chunk(msgspec.Struct, gc=False):
    choices: list[Choice] | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    usage: dict[str, Any] | None = None
    error: Any = None


T = TypeVar("T")


def decode_each(
    datas: list[bytes], many: msgspec.json.Decoder[list[T]], one: msgspec.json.Decoder[T]
) -> list[T | None]:
    """Every event's struct (None where it is not one), in one decoder call for the whole stream when it can.

    Joined as one array, a stream of N valid events decodes to exactly N elements; any bad event makes the array
    fail to decode or changes the count, and then each event is decoded alone so that only the bad ones are lost.
    """
    if not datas:
        return []
    try:
        decoded: list[T | None] = list(many.decode(b"[" + b",".join(datas) + b"]"))
        if len(decoded) == len(datas):
            return decoded
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    return [decode_one(d, one) for d in datas]


def decode_one(data: bytes, one: msgspec.json.Decoder[T]) -> T | None:
    try:
        return one.decode(data)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError:
        pass
    try:
        # Invalid UTF-8 inside a string value: read it as a client would, with replacement characters.
        return one.decode(data.decode("utf-8", "replace").encode())
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


_MANY = msgspec.json.Decoder(list[Chunk])
_ONE = msgspec.json.Decoder(Chunk)


def decode_chunks(datas: list[bytes]) -> list[Chunk | None]:
    return decode_each(datas, _MANY, _ONE)


def decode_chunk(data: bytes) -> Chunk | None:
    return decode_one(data, _ONE)
