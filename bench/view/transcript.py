"""One result's conversation as one transcript: every message once, in order, and each model call where it was made.

A multi-turn client sends the whole conversation again with every request (Chat Completions' `messages`, the
Responses API's `input`), so a request usually extends the one before it: its messages are the previous request's,
then the previous answer as the client sent it back, then what came since (tool results, a user's reply). Only
what is new is shown before each call, and the answer sent back is not shown again (it is that call's answer). A
request that does not extend the one before (a client that trimmed or rewrote its history) is said, and its
messages are shown whole; a retry sends the same messages and adds none. A Responses request chained by
`previous_response_id` carries only its new input.

Everything here comes from recorded requests and answers: untrusted. The page renders it as text; here it is
bounded (a message's text, a pretty-printed JSON value) so that one hostile request cannot make a page of megabytes.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from bench.core.nesting import depth_exceeds
from bench.core.parsed import ParsedExchange

MAX_TEXT = 256 * 1024  # characters of one message, argument list or JSON value shown; the raw bytes have the rest
MAX_DEPTH = 100  # JSON nested deeper is shown as it was sent, not re-indented (orjson stops at 255 levels)


class ToolCall(msgspec.Struct):
    name: str
    arguments: str  # pretty-printed when they are JSON
    id: str = ""


class Message(msgspec.Struct):
    role: str
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    name: str = ""  # a tool result's tool name and call id, or a message's `name`


def clip(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… {len(text) - limit:,} more characters (the raw bytes hold them all)"


def pretty(value: Any) -> str:
    """A JSON value indented for reading (a string holding JSON is parsed first), bounded; never raises."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return clip(value)
    if depth_exceeds(value, MAX_DEPTH):
        return "(nested more than 100 levels deep: the raw bytes show it as sent)"
    try:
        return clip(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
    except (orjson.JSONEncodeError, TypeError):
        return clip(str(value))


def _content(value: Any) -> str:
    """A message's content as text: a string, or content parts (text parts joined; others named, e.g. [image_url])."""
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, list):
        parts = []
        for p in value:
            if isinstance(p, dict):
                text = p.get("text") if isinstance(p.get("text"), str) else p.get("content")
                parts.append(text if isinstance(text, str) else f"[{str(p.get('type') or 'part')[:40]}]")
            else:
                parts.append(str(p))
        return clip("".join(parts))
    return "" if value is None else clip(str(value))


def _call(name: Any, arguments: Any, ident: Any = "") -> ToolCall:
    arguments = pretty(arguments if arguments is not None else {})
    return ToolCall(name=clip(str(name or ""), 200), arguments=arguments, id=clip(str(ident or ""), 200))


def _key(item: Any) -> bytes:
    """What makes two messages the same one: their JSON, keys sorted."""
    try:
        return orjson.dumps(item, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return b"\x00unkeyable:%d" % id(item)  # never equal to another: such a request reads as rewritten


def _message(item: Any) -> Message | None:
    if not isinstance(item, dict):
        return Message(role="?", text=clip(str(item))) if isinstance(item, str) else None
    kind = item.get("type")
    if kind == "function_call":
        return Message(
            role="assistant", tool_calls=[_call(item.get("name"), item.get("arguments"), item.get("call_id"))]
        )
    if kind == "function_call_output":
        return Message(role="tool", text=_content(item.get("output")), name=clip(str(item.get("call_id") or ""), 200))
    if kind == "reasoning":
        summary = item.get("summary")
        return Message(role="assistant", reasoning=_content(summary if summary is not None else item.get("content")))
    calls = [
        _call((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"), c.get("id"))
        for c in item.get("tool_calls") or []
        if isinstance(c, dict) and isinstance(c.get("function") or {}, dict)
    ]
    return Message(
        role=clip(str(item.get("role") or kind or "?"), 40),
        text=_content(item.get("content")),
        reasoning=_content(item.get("reasoning_content") or item.get("reasoning") or ""),
        tool_calls=calls,
        name=clip(str(item.get("name") or item.get("tool_call_id") or ""), 200),
    )


def request_messages(request: dict[str, Any] | None) -> tuple[list[tuple[bytes, Message]], bool]:
    """The request's messages in order, each with its key, and whether the request is chained to a previous
    response (`previous_response_id`: its input is only what is new)."""
    if not request:
        return [], False
    out: list[tuple[bytes, Message]] = []
    instructions = request.get("instructions")
    if isinstance(instructions, str):
        out.append((_key({"instructions": instructions}), Message(role="system", text=clip(instructions))))
    items = request.get("messages")
    if items is None:
        items = request.get("input")
    if items is None and "prompt" in request:
        items = request["prompt"] if isinstance(request["prompt"], str) else _content(request["prompt"])
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items if isinstance(items, list) else []:
        message = _message(item)
        if message is not None:
            out.append((_key(item), message))
    return out, bool(request.get("previous_response_id"))


def answer(parsed: ParsedExchange) -> Message:
    return Message(
        role="assistant",
        text=clip(parsed.content or parsed.refusal),
        reasoning=clip(parsed.reasoning),
        tool_calls=[_call(c.name, c.arguments, c.id) for c in parsed.tool_calls],
    )


def _echoes(sent: Message, said: Message) -> bool:
    """Whether a message the client sent back is the answer it got (text and calls, ignoring whitespace)."""
    calls = [(c.name, c.arguments) for c in sent.tool_calls]
    return sent.text.strip() == said.text.strip() and calls == [(c.name, c.arguments) for c in said.tool_calls]


class Transcript:
    """Messages new to the conversation, request by request (feed the calls in the order they were made)."""

    def __init__(self) -> None:
        self._keys: list[bytes] | None = None
        self._answer: Message | None = None
        self._tools: dict[str, str] = {}  # tool call id -> tool name, to name tool results

    def add(self, request: dict[str, Any] | None, said: Message) -> tuple[list[Message], bool]:
        """(the messages this request adds, whether it rewrote the conversation instead of extending it)."""
        items, chained = request_messages(request)
        keys = [k for k, _ in items]
        start, rewritten = 0, False
        if self._keys is not None and not chained:
            if keys[: len(self._keys)] == self._keys:
                start = len(self._keys)
            else:
                rewritten = True
        new = [m for _, m in items[start:]]
        if start and new and new[0].role == "assistant" and self._answer is not None and _echoes(new[0], self._answer):
            new = new[1:]  # the previous call's answer as sent back: shown once, as that call's answer
        for message in [*(m for _, m in items), said]:
            for call in message.tool_calls:
                if call.id:
                    self._tools[call.id] = call.name
        for message in new:
            if message.role == "tool" and message.name in self._tools:
                message.name = f"{self._tools[message.name]} · {message.name}"
        self._keys, self._answer = keys, said
        return new, rewritten
