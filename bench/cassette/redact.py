"""Secret removal, applied by the cassette writer to every record it is given.

The writer is the only way records reach a file, so every write path goes through here (vcrpy #961 leaked a key
through a path that skipped its filter). Header values are replaced, the secret values they held are scrubbed from
everything else in the record (query, body, response bytes, error text) in case an upstream echoes them, and the
record lists what was redacted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import msgpack

from bench.fingerprint import SECRET_QUERY_PARAMS

REDACTED = "[REDACTED]"

DEFAULT_SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "cookie",
        "set-cookie",
        "x-goog-api-key",
        "anthropic-api-key",
        "openai-organization",
        "openai-project",
    }
)

# Shorter values are not scrubbed from bodies: replacing every "abc" in a stream would corrupt it for nothing.
MIN_SCRUB_LEN = 8


@dataclass(frozen=True)
class Redactor:
    """What counts as secret: header names (case-insensitive) and JSON body field names (any depth)."""

    headers: frozenset[str] = DEFAULT_SECRET_HEADERS
    json_fields: frozenset[str] = frozenset()
    extra_values: tuple[str, ...] = field(default=())

    @classmethod
    def with_extra(
        cls, headers: Iterable[str] = (), json_fields: Iterable[str] = (), values: Iterable[str] = ()
    ) -> Redactor:
        return cls(
            headers=DEFAULT_SECRET_HEADERS | {h.lower() for h in headers},
            json_fields=frozenset(json_fields),
            extra_values=tuple(v for v in values if v),
        )

    def redact_headers(
        self, headers: list[list[str]], where: str, found: list[str], values: set[str]
    ) -> list[list[str]]:
        out: list[list[str]] = []
        for name, value in headers:
            if name.lower() in self.headers:
                found.append(f"{where}.headers.{name.lower()}")
                values.add(value)
                scheme, _, token = value.partition(" ")
                if token and scheme.lower() in ("bearer", "basic", "token"):
                    values.add(token)
                out.append([name, REDACTED])
            else:
                out.append([name, value])
        return out

    def redact_exchange(self, record: dict[str, Any]) -> dict[str, Any]:
        """Return the record with secrets removed; `redacted` lists what was removed (never the values)."""
        found: list[str] = []
        values: set[str] = set(self.extra_values)
        request = record.get("request")
        if isinstance(request, dict):
            request["headers"] = self.redact_headers(request.get("headers", []), "request", found, values)
            query = request.get("query", "")
            if query:
                request["query"] = self._redact_query(query, found, values)
            body = request.get("body", b"")
            if self.json_fields and body:
                request["body"] = self._redact_json_fields(body, found, values)
        response = record.get("response")
        if isinstance(response, dict):
            response["headers"] = self.redact_headers(response.get("headers", []), "response", found, values)
        scrub = sorted((v for v in values if len(v) >= MIN_SCRUB_LEN), key=len, reverse=True)
        if scrub:
            # Searching the packed record once is ~10x cheaper than walking every string and chunk of it, and an
            # upstream that echoes a key is rare: walk only for the secrets that are actually there.
            blob = msgpack.packb(record, use_bin_type=True)
            present = [(s, b) for s, b in ((s, s.encode()) for s in scrub) if b in blob]
            if present:
                _scrub_in_place(record, present, found)
        if found:
            record["redacted"] = sorted(set(record.get("redacted", [])) | set(found))
        return record

    def _redact_query(self, query: str, found: list[str], values: set[str]) -> str:
        pairs = parse_qsl(query, keep_blank_values=True)
        out = []
        for k, v in pairs:
            if k.lower() in SECRET_QUERY_PARAMS:
                found.append(f"request.query.{k}")
                values.add(v)
                v = REDACTED
            out.append((k, v))
        return urlencode(out)

    def _redact_json_fields(self, body: bytes, found: list[str], values: set[str]) -> bytes:
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return body
        changed = False

        def walk(node: Any, path: str) -> Any:
            nonlocal changed
            if isinstance(node, dict):
                result = {}
                for k, v in node.items():
                    if k in self.json_fields:
                        found.append(f"request.body.{path}{k}")
                        if isinstance(v, str):
                            values.add(v)
                        result[k] = REDACTED
                        changed = True
                    else:
                        result[k] = walk(v, f"{path}{k}.")
                return result
            if isinstance(node, list):
                return [walk(v, path) for v in node]
            return node

        doc = walk(doc, "")
        return json.dumps(doc, ensure_ascii=False).encode() if changed else body


def _scrub_in_place(node: Any, secrets: list[tuple[str, bytes]], found: list[str], path: str = "") -> Any:
    """Replace every occurrence of a secret value in strings and bytes anywhere in the record."""
    if isinstance(node, dict):
        for k, v in node.items():
            node[k] = _scrub_in_place(v, secrets, found, f"{path}{k}.")
        return node
    if isinstance(node, list):
        for i, v in enumerate(node):
            node[i] = _scrub_in_place(v, secrets, found, path)
        return node
    if isinstance(node, bytes):
        for _, b in secrets:
            if b in node:
                node = node.replace(b, REDACTED.encode())
                found.append(f"scrubbed:{path.rstrip('.')}")
        return node
    if isinstance(node, str):
        for s, _ in secrets:
            if s in node:
                node = node.replace(s, REDACTED)
                found.append(f"scrubbed:{path.rstrip('.')}")
        return node
    return node
