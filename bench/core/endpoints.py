"""Which OpenAI API a request spoke, from its path: the parser, the traffic report and the simulator key on it.

Paths are matched by their ending, so a gateway's prefix (`/openai/v1/...`, `/api/v1/...`) does not matter. A path
bench does not know keeps its own name: its exchanges are reported and counted under it, never dropped.
"""

from __future__ import annotations

CHAT = "chat.completions"
RESPONSES = "responses"
COMPLETIONS = "completions"
EMBEDDINGS = "embeddings"

_SUFFIXES = (
    ("/chat/completions", CHAT),
    ("/responses", RESPONSES),
    ("/completions", COMPLETIONS),
    ("/embeddings", EMBEDDINGS),
)


def endpoint_of(path: str | None) -> str:
    """The API's name for a known endpoint, else the path itself (without its query); `chat.completions` when
    there is no path at all (records built by hand, e.g. a live driver's parse)."""
    if not path:
        return CHAT
    clean = path.split("?", 1)[0].rstrip("/")
    for suffix, name in _SUFFIXES:
        if clean.endswith(suffix):
            return name
    return clean or "/"
