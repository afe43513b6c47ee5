"""Which client sent a request, from its User-Agent: the product names without versions or comments.

`OpenAI/Python 1.51.0` is `OpenAI/Python`, `python-httpx/0.27.0` is `python-httpx`, `Python/3.11 aiohttp/3.9.5` is
`Python aiohttp`, `curl/8.5.0` is `curl`. Versions are dropped so that one client's traffic groups together across
upgrades; at most the first two product names are kept. No User-Agent at all is `(none)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_COMMENT = re.compile(r"\([^)]*\)")
_VERSION = re.compile(r"^v?\d[\w.+-]*$")
_SLASH_VERSION = re.compile(r"/v?\d[\w.+-]*$")
NONE = "(none)"


def client_family(user_agent: str | None) -> str:
    if not user_agent or not user_agent.strip():
        return NONE
    names: list[str] = []
    for token in _COMMENT.sub(" ", user_agent).split():
        if _VERSION.match(token):
            continue
        name = _SLASH_VERSION.sub("", token)
        if name and name not in names:
            names.append(name)
        if len(names) == 2:
            break
    return " ".join(names) or NONE


def header(headers: Iterable[Sequence[str]] | None, name: str) -> str | None:
    """The first value of a header (case-insensitive) in a record's [[name, value], ...] list."""
    low = name.lower()
    for pair in headers or ():
        if len(pair) >= 2 and isinstance(pair[0], str) and pair[0].lower() == low:
            return str(pair[1])
    return None
