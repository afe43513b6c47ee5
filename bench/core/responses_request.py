"""Requests translated between Chat Completions and the Responses API, both ways.

`bench record --api responses` sends the catalog's chat-shaped requests as Responses API requests; the simulator
answers a Responses API request with the same behaviours as a chat one. Both go through here, and a chat request
translated to the Responses API and back gives the same messages and tools (a test holds them to it), so the
simulator recognises catalog tests on either API.

Mapping: system/developer/user messages are input messages of the same role; an assistant message is an assistant
input message (its text) followed by one `function_call` item per tool call; a `tool` message is a
`function_call_output` item; tools lose their `function` wrapper; `max_tokens`/`max_completion_tokens` is
`max_output_tokens`; `response_format` is `text.format`; `tool_choice` naming a function loses its wrapper.
`seed`, `stream_options`, `n`, `stop`, `logprobs` and the penalties have no Responses API counterpart and are not
sent. `instructions` becomes a leading system message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_NOT_IN_RESPONSES = frozenset(
    {"seed", "stream_options", "n", "stop", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty"}
)
_HANDLED = frozenset({"messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "response_format"})


def _text(content: Any) -> Any:
    """A chat message's content as Responses input content: strings stay strings, text parts become input_text."""
    if isinstance(content, list):
        return [
            {"type": "input_text", "text": part.get("text", "")}
            if isinstance(part, Mapping) and part.get("type") == "text"
            else part
            for part in content
        ]
    return content


def responses_from_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in body.items() if k not in _HANDLED and k not in _NOT_IN_RESPONSES}
    items: list[dict[str, Any]] = []
    for m in body.get("messages") or []:
        role = m.get("role")
        if role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": m.get("content") or ""}
            )
            continue
        if role != "assistant" or m.get("content"):
            items.append({"role": role, "content": _text(m.get("content"))})
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id"),
                    "name": fn.get("name"),
                    "arguments": fn.get("arguments") or "",
                }
            )
    out["input"] = items
    tools = body.get("tools")
    if tools:
        out["tools"] = [
            {"type": "function", **(t.get("function") or {})} if t.get("type", "function") == "function" else dict(t)
            for t in tools
        ]
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        out["tool_choice"] = {"type": "function", "name": choice["function"].get("name")}
    elif choice is not None:
        out["tool_choice"] = choice
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None:
        out["max_output_tokens"] = limit
    fmt = body.get("response_format")
    if isinstance(fmt, Mapping):
        inner = fmt.get("json_schema") if fmt.get("type") == "json_schema" else None
        out["text"] = {"format": {"type": fmt.get("type"), **(inner if isinstance(inner, Mapping) else {})}}
    return out


def _content_text(content: Any) -> Any:
    """Responses input content as chat content: a list of text parts becomes their text joined."""
    if not isinstance(content, list):
        return content
    return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))


def chat_from_responses(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat request a Responses API request amounts to (for the simulator's behaviours)."""
    out: dict[str, Any] = {k: v for k, v in body.items() if k not in ("input", "instructions", "tools", "text")}
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message")
        if kind == "message" and "role" in item:
            messages.append({"role": item["role"], "content": _content_text(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""},
            }
            last = messages[-1] if messages else None
            if last is not None and last.get("role") == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": output if isinstance(output, str) else _content_text(output),
                }
            )
    out["messages"] = messages
    tools = body.get("tools")
    if isinstance(tools, list):
        out["tools"] = [
            {"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
            if isinstance(t, Mapping) and t.get("type") == "function"
            else t
            for t in tools
        ]
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "function" and "name" in choice:
        out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    if "max_output_tokens" in body:
        out["max_tokens"] = out.pop("max_output_tokens")
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), Mapping) else None
    if isinstance(fmt, Mapping):
        rest = {k: v for k, v in fmt.items() if k != "type"}
        out["response_format"] = {"type": fmt.get("type"), **({"json_schema": rest} if rest else {})}
    return out
