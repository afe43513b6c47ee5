"""The fields of a Responses API event (and of the response object it carries) that an answer is built from.

Decoded with msgspec like bench.core.chunks: unknown fields are skipped, and an event whose fields have other types than
a client expects fails to decode and is reported as a bad event. Fields whose type varies between servers (a
`delta` that is not a string, an `error` that is a string) are `Any` and checked where they are read.
"""

from __future__ import annotations

from typing import Any

import msgspec

from bench.core.chunks import decode_each, decode_one


class Part(msgspec.Struct, gc=False):
    """A content part of a message item (`output_text`, `refusal`) or a reasoning item's summary/content part."""

    type: str | None = None
    text: Any = None
    refusal: Any = None


class Item(msgspec.Struct, gc=False):
    """An output item: `message`, `function_call`, `reasoning`, or a built-in tool's call."""

    type: str | None = None
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    content: Any = None  # a list of Parts for messages and reasoning; decoded where it is read
    summary: Any = None
    status: str | None = None


class Response(msgspec.Struct, gc=False):
    id: str | None = None
    status: str | None = None
    model: str | None = None
    output: list[Item] | None = None
    usage: dict[str, Any] | None = None
    error: Any = None
    incomplete_details: Any = None


class Event(msgspec.Struct, gc=False):
    type: str | None = None
    delta: Any = None
    text: Any = None
    refusal: Any = None
    arguments: Any = None
    output_index: int | None = None
    content_index: int | None = None
    item_id: str | None = None
    item: Item | None = None
    response: Response | None = None
    message: Any = None
    code: Any = None


_MANY = msgspec.json.Decoder(list[Event])
_ONE = msgspec.json.Decoder(Event)
_PARTS = msgspec.convert


def decode_events(datas: list[bytes]) -> list[Event | None]:
    """Every event (None where it is not one), in one decoder call when the whole stream is valid."""
    return decode_each(datas, _MANY, _ONE)


def decode_event(data: bytes) -> Event | None:
    return decode_one(data, _ONE)


def decode_response(body: bytes) -> Response | None:
    """A non-streamed response object, or None when the body is not one."""
    try:
        return msgspec.json.decode(body, type=Response)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    try:
        return msgspec.json.decode(body.decode("utf-8", "replace").encode(), type=Response)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def parts(value: Any) -> list[Part]:
    """The content parts of an item, skipping anything that is not one."""
    if not isinstance(value, list):
        return []
    out: list[Part] = []
    for raw in value:
        if isinstance(raw, dict):
            try:
                out.append(_PARTS(raw, Part))
            except msgspec.ValidationError:
                continue
    return out
