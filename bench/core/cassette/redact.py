"""Secret removal, applied by the cassette writer to every record it is given (docs/proxy.md, "Secrets").

The writer is the only way records reach a file, so every write path goes through here (vcrpy #961 leaked a key
through a path that skipped its filter). What is secret: the values of secret headers (request and response), of
secret query parameters and of secret JSON body fields, and values the proxy was given (its upstream key, its client
token). Each is replaced where it stands, then scrubbed from everything else in the record in every form an
upstream may echo it in (`secret_forms`), across read boundaries and inside compressed bodies. The record lists
what was redacted, never the values.

The work is in functions over the parts of a record (headers, query, body, reads, strings), so that the record's
type can change without changing them; `Redactor.redact_exchange` only wires them to the record.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import re
from bisect import bisect_left
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import msgspec
import orjson
import stringzilla

from bench.core.cassette.records import Exchange, encode
from bench.core.decoding import Decoded, content_codings, decode_reads, encode_reads
from bench.core.fingerprint import SECRET_QUERY_PARAMS

REDACTED = "[REDACTED]"
_REDACTED_B = REDACTED.encode()

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

# JSON body fields whose string values are credentials in common gateways' request bodies (LiteLLM's `api_key`, ...).
# Matched case-insensitively at any depth, inside arrays too. Only request bodies: in a response, `token` is a
# logprobs field holding model output.
DEFAULT_SECRET_FIELDS = frozenset({"api_key", "apikey", "password", "secret", "token"})

# Shorter values are not scrubbed from the rest of a record: replacing every "abc" in a stream would corrupt it for
# nothing. They are still replaced where they stand (the header, parameter or field that held them).
MIN_SCRUB_LEN = 8


# Every read of a recorded body is searched for every form of every secret: the search is most of recording's own
# cost per forwarded chunk. bytes.find's speed depends on the text: a form whose bytes are common in it (a key's
# letters in English prose; the two bytes of `\\u`) is scanned about a byte per step, ~8-25 us per 10 KB of SSE here,
# against ~1.5 us for a form of rarer bytes. StringZilla's SIMD substring search takes ~0.8 us per form per 10 KB
# whatever the text (benchmarks/record_steps.py).
_find: Callable[..., int] = stringzilla.find  # (haystack, needle, start=0): index or -1


@functools.lru_cache(maxsize=4096)
def secret_forms(value: str) -> tuple[bytes, ...]:
    """The byte strings an echo of `value` may take: raw UTF-8; percent-encoded (upper- and lower-case hex, `+` for
    spaces); JSON-escaped (ASCII-only, `\\/` for `/`, every character as `\\uXXXX`); and the base64 (standard and
    URL-safe) of any text that contains it, such as `user:key` in Basic auth (three alignments, only the groups that
    hold nothing but the value)."""
    raw = value.encode()
    forms = {raw}
    for pct in (quote(value, safe=""), quote_plus(value, safe=""), quote(value, safe="/:")):
        forms.add(pct.encode())
        forms.add(_lower_hex(pct).encode())
    js = json.dumps(value)[1:-1]
    forms.add(js.encode())
    forms.add(js.replace("/", "\\/").encode())
    forms.add(json.dumps(value, ensure_ascii=False)[1:-1].encode())
    units = value.encode("utf-16-be")
    hexes = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
    forms.add("".join(f"\\u{h}" for h in hexes).encode())
    forms.add("".join(f"\\u{h.upper()}" for h in hexes).encode())
    for start in range(3):
        groups = (len(raw) - start) // 3
        if groups * 4 >= MIN_SCRUB_LEN:
            part = raw[start : start + 3 * groups]
            forms.add(base64.b64encode(part))
            forms.add(base64.urlsafe_b64encode(part))
    return tuple(sorted((f for f in forms if len(f) >= MIN_SCRUB_LEN), key=len, reverse=True))


def _lower_hex(pct: str) -> str:
    out = pct.split("%")
    return out[0] + "".join("%" + p[:2].lower() + p[2:] for p in out[1:])


class SecretSet:
    """Secret values found so far in one record (and those given up front); `forms()` is what to scrub."""

    __slots__ = ("values",)

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values: set[str] = {v for v in values if v}

    def add(self, value: str) -> None:
        value = value.strip()
        if value:
            self.values.add(value)

    def add_header_value(self, name: str, value: str) -> None:
        """A secret header's value, and the credential inside it: after an auth scheme, Basic's decoded
        `user:password` and the password, each cookie's value."""
        self.add(value)
        scheme, _, rest = value.strip().partition(" ")
        rest = rest.strip()
        if rest:
            self.add(rest)
            if scheme.lower() == "basic":
                try:
                    decoded = base64.b64decode(rest, validate=True).decode()
                except ValueError:
                    decoded = ""
                if decoded:
                    self.add(decoded)
                    self.add(decoded.partition(":")[2])
        if name in ("cookie", "set-cookie"):
            parts = value.split(";") if name == "cookie" else value.split(";")[:1]
            for part in parts:
                self.add(part.partition("=")[2].strip().strip('"'))

    def add_query_value(self, raw: str) -> None:
        """A secret query parameter's value, as sent (percent-encoded) and decoded, since an upstream echoes either."""
        self.add(raw)
        self.add(unquote(raw))
        self.add(unquote_plus(raw))

    def forms(self) -> list[bytes]:
        """Every form of every value long enough to scrub, longest first; a value that contains another is left
        out (scrubbing the shorter one removes it in every form too)."""
        return _forms_of(frozenset(self.values))


@functools.lru_cache(maxsize=1024)
def _forms_of(values: frozenset[str]) -> list[bytes]:
    # The same keys arrive with every exchange: worked out once per set of values.
    long = sorted((v for v in values if len(v) >= MIN_SCRUB_LEN), key=len)
    kept: list[str] = []
    for v in long:
        if not any(k in v for k in kept):
            kept.append(v)
    out: set[bytes] = set()
    for v in kept:
        out.update(secret_forms(v))
    return sorted(out, key=len, reverse=True)


# -- the parts -------------------------------------------------------------------------------------------------------


def redact_headers(
    headers: Sequence[Sequence[str]], secret_names: frozenset[str], where: str, found: list[str], secrets: SecretSet
) -> list[list[str]]:
    """Secret headers' values replaced (and added to `secrets`); other headers unchanged."""
    out: list[list[str]] = []
    for name, value in headers:
        low = name.lower()
        if low in secret_names:
            found.append(f"{where}.headers.{low}")
            secrets.add_header_value(low, value)
            out.append([name, REDACTED])
        else:
            out.append([name, value])
    return out


def redact_query(query: str, secret_names: frozenset[str], found: list[str], secrets: SecretSet) -> str:
    """Secret parameters' values replaced (names matched case-insensitively, after percent-decoding); every other
    byte of the query kept as sent."""
    if not query:
        return query
    parts = query.split("&")
    changed = False
    for i, part in enumerate(parts):
        name, sep, value = part.partition("=")
        key = unquote_plus(name)
        if key.lower() in secret_names:
            found.append(f"request.query.{key}")
            secrets.add_query_value(value)
            parts[i] = f"{name}{sep}{REDACTED}"
            changed = True
    return "&".join(parts) if changed else query


def redact_json_fields(
    body: bytes, fields: frozenset[str], any_value: frozenset[str], found: list[str], secrets: SecretSet
) -> bytes:
    """A JSON body with secret fields' values replaced, at any depth and inside arrays. Names are matched
    case-insensitively; a field in `fields` is redacted when it holds a string, one in `any_value` whatever it holds.
    A body that is not JSON, or holds no secret field, is returned as it is (the same object)."""
    if not body or not (fields or any_value):
        return body
    head = body.lstrip()[:1]
    if head not in (b"{", b"["):
        return body
    # Parsing every request body costs more than the rest of redaction: parse only when a secret field's name is
    # there as a quoted string (or the body holds escapes, which a key could be written with).
    if _find(body, b"\\u") < 0:
        lowered = body.lower()
        if not any(_find(lowered, name) >= 0 for name in _quoted(fields | any_value)):
            return body
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # not JSON, or nested deeper than orjson's limit (1024): then no field can be found either
    hits = 0
    # Iterative, not recursive: a body nested a thousand deep must not exhaust the stack.
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                low = k.lower() if isinstance(k, str) else k
                if low in any_value or (low in fields and isinstance(v, str)):
                    found.append(f"request.body.{path}{k}")
                    _add_json_value(secrets, v)
                    node[k] = REDACTED
                    hits += 1
                elif isinstance(v, dict | list):
                    stack.append((v, f"{path}{k}."))
        elif isinstance(node, list):
            stack.extend((v, path) for v in node if isinstance(v, dict | list))
    if not hits:
        return body
    try:
        return json.dumps(doc, ensure_ascii=False).encode()
    except RecursionError:
        found.append("request.body")
        return _REDACTED_B


def _add_json_value(secrets: SecretSet, value: Any) -> None:
    """A secret field's value of any JSON type, in every form an upstream may echo it: each string and number inside
    it (an object or list echoed in parts), and the whole value as JSON, compact and as Python's json writes it."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            secrets.add(node)
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int | float):
            secrets.add(str(node))
        elif isinstance(node, dict):
            stack.extend(node.values())  # the values only: a name like "organization" is no secret
        elif isinstance(node, list):
            stack.extend(node)
    if not isinstance(value, str):
        with contextlib.suppress(TypeError, ValueError, RecursionError):
            secrets.add(orjson.dumps(value).decode())
            secrets.add(json.dumps(value))
            secrets.add(json.dumps(value, ensure_ascii=False))


@functools.lru_cache(maxsize=64)
def _quoted(names: frozenset[str]) -> tuple[bytes, ...]:
    return tuple(b'"' + n.lower().encode() + b'"' for n in names)


def _spans(data: bytes, forms: Sequence[bytes]) -> list[tuple[int, int]]:
    """Where any form occurs in `data`, as merged (start, end) spans."""
    spans: list[tuple[int, int]] = []
    escapes = None
    for form in forms:
        if form.startswith(b"\\u"):
            # Every character \u-escaped: rare, and impossible without a backslash-u anywhere (one quick search).
            if escapes is None:
                escapes = _find(data, b"\\u") >= 0
            if not escapes:
                continue
        i = _find(data, form)
        while i >= 0:
            spans.append((i, i + len(form)))
            i = _find(data, form, i + 1)
    if not spans:
        return spans
    spans.sort()
    merged = [spans[0]]
    for s, e in spans[1:]:
        ls, le = merged[-1]
        if s <= le:
            merged[-1] = (ls, max(le, e))
        else:
            merged.append((s, e))
    return merged


def _holds_any(data: bytes, forms: Sequence[bytes]) -> bool:
    """Whether any form occurs in `data` (the \\u-escaped forms only if a backslash-u is there at all)."""
    escapes = None
    for form in forms:
        if form.startswith(b"\\u"):
            if escapes is None:
                escapes = _find(data, b"\\u") >= 0
            if not escapes:
                continue
        if _find(data, form) >= 0:
            return True
    return False


def scrub_reads(reads: Sequence[bytes], forms: Sequence[bytes]) -> list[bytes] | None:
    """Secrets scrubbed from a sequence of reads as one byte stream, so that one split across reads is found; None if
    there was none. The marker takes the place of the secret in the read where it began, and later reads lose the
    rest of it (possibly becoming empty): every read keeps its place, so its arrival time, and no SSE event boundary
    moves (a secret never holds an empty line)."""
    return _cut(reads, _read_spans(reads, forms))


def _cut(reads: Sequence[bytes], spans: Sequence[tuple[int, int]]) -> list[bytes] | None:
    """`scrub_reads` given where the secrets are in the reads joined."""
    if not spans:
        return None
    return _replace(reads, [(s, e, _REDACTED_B) for s, e in spans])


# Reads are searched joined in windows of about this many bytes, each with the last bytes of the reads before it (so
# a secret split across reads is found once): a 50 MB answer is never copied whole, and each window is one step of
# the recording task (`read_spans_steps`), ~8 forms through 16 KB being ~40 us here.
JOIN_LIMIT = 16 << 10


def _read_spans(reads: Sequence[bytes], forms: Sequence[bytes]) -> list[tuple[int, int]]:
    """`_spans` of the reads joined, without joining them when they are large."""
    steps = read_spans_steps(reads, forms)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            spans: list[tuple[int, int]] = done.value
            return spans


def read_spans_steps(reads: Sequence[bytes], forms: Sequence[bytes]) -> Generator[None, None, list[tuple[int, int]]]:
    """`_read_spans` a window at a time, yielding between windows; returns the spans. A window is the reads that
    follow the last one, joined, until they hold JOIN_LIMIT bytes, searched together with the last bytes of the
    reads before (one byte less than the longest form)."""
    if not forms:
        return []
    keep = max(map(len, forms)) - 1
    found: list[tuple[int, int]] = []
    carry = b""
    base = 0  # offset of the current window's first read in the whole body
    # Where each read ends in the whole body: a window's last read is found by bisection, not by a Python loop over
    # the reads (which cost more than searching them).
    ends = list(accumulate(map(len, reads)))
    i = 0
    while i < len(reads):
        # The reads from i up to and including the first that brings the window to JOIN_LIMIT bytes (or the last).
        j = min(bisect_left(ends, base + JOIN_LIMIT, i) + 1, len(reads))
        size = ends[j - 1] - base
        group = reads[i:j]
        i = j
        if base:
            yield
        window = b"".join([carry, *group])
        start = base - len(carry)
        for s, e in _spans(window, forms):
            if start + e > base:  # a match that ends inside the carried bytes was found with the window before
                found.append((start + s, start + e))
        base += size
        carry = window[-keep:] if keep else b""
    merged: list[tuple[int, int]] = []
    for s, e in sorted(found):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


class BodyScrubber:
    """Scrubs a body's reads before they are written in parts, a secret split across parts included: the reads held
    are searched as one stream, and only reads whose every byte is followed by at least one form's length less one
    byte go out, so that a secret beginning in them is seen whole (the reads held keep what follows a secret cut in
    two: `_cut` removes the rest of it there too). Uncompressed bodies only (a compressed one is searched decoded,
    which a part cannot be on its own)."""

    __slots__ = ("forms", "keep", "scrubbed")

    def __init__(self, forms: Sequence[bytes]) -> None:
        self.forms = list(forms)
        self.keep = max(map(len, self.forms)) - 1 if self.forms else 0
        self.scrubbed = False  # a secret was found (and scrubbed) in what it was given

    def split_steps(
        self, reads: Sequence[bytes], hold: int = 0
    ) -> Generator[None, None, tuple[list[bytes], list[bytes]]]:
        """(reads that may be written now, reads to hold), all scrubbed, in a window per step; the held reads are
        at least `hold` bytes (and at least a form's length less one) unless there are fewer."""
        spans = yield from read_spans_steps(reads, self.forms)
        cut = _cut(reads, spans)
        out = list(reads) if cut is None else cut
        self.scrubbed = self.scrubbed or cut is not None
        need = max(hold, self.keep)
        j, after = len(out), 0
        while j > 0 and after < need:
            j -= 1
            after += len(out[j])
        return out[:j], out[j:]


def scrub_text(value: Any, forms: Sequence[bytes], strs: Sequence[str], found: list[str], path: str) -> Any:
    """Every occurrence of a secret removed from strings and bytes anywhere in a nested value (structs and dicts
    changed in place)."""
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            setattr(value, name, scrub_text(getattr(value, name), forms, strs, found, f"{path}{name}."))
        return value
    if isinstance(value, dict):
        for k, v in value.items():
            value[k] = scrub_text(v, forms, strs, found, f"{path}{k}.")
        return value
    if isinstance(value, list):
        for i, v in enumerate(value):
            value[i] = scrub_text(v, forms, strs, found, path)
        return value
    if isinstance(value, bytes):
        spans = _spans(value, forms)
        if spans:
            found.append(f"scrubbed:{path.rstrip('.')}")
            pieces: list[bytes] = []
            prev = 0
            for start, end in spans:
                pieces += [value[prev:start], _REDACTED_B]
                prev = end
            value = b"".join([*pieces, value[prev:]])
        return value
    if isinstance(value, str):
        if any(form in value for form in strs):
            found.append(f"scrubbed:{path.rstrip('.')}")
            for form in strs:
                value = value.replace(form, REDACTED)
        return value
    return value


def scrub_body_steps(
    headers: Sequence[Sequence[str]],
    reads: Sequence[bytes],
    forms: Sequence[bytes],
    found: list[str],
    values: Iterable[str] = (),
) -> Generator[None, None, list[bytes] | None]:
    """A response body's reads with secrets scrubbed, or None if none was there, in steps (a window of the reads
    each, `read_spans_steps`), yielding between them. An event stream is also searched for `values` split across its
    events' text (`scrub_split_secrets`). A compressed body is searched decoded, in one step; if a secret is there,
    the scrubbed pieces are encoded again with the same coding, one flushed piece per read, so each read still
    decodes to its own (scrubbed) piece at its recorded time."""
    plain = _cut(reads, (yield from read_spans_steps(reads, forms)))
    codings = content_codings(headers)
    events = _is_event_stream(headers)
    if not codings:
        split = scrub_split_secrets(plain if plain is not None else reads, values) if events else None
        if split is not None:
            found.append("scrubbed:response.chunks (a secret split across events)")
            plain = split
        elif plain is not None:
            found.append("scrubbed:response.chunks")
        return plain
    current = list(reads) if plain is None else plain
    decoded: Decoded = decode_reads(current, codings)
    scrubbed = scrub_reads(decoded.pieces, forms)
    if events and not decoded.too_large:
        split = scrub_split_secrets(scrubbed if scrubbed is not None else decoded.pieces, values)
        if split is not None:
            found.append("scrubbed:response.chunks (a secret split across events)")
            scrubbed = split
    if decoded.too_large:
        # What lies past the decoding limit cannot be searched: it is not kept.
        found.append("response.chunks: compressed body decodes past the limit; the rest dropped unsearched")
        return encode_reads(scrubbed if scrubbed is not None else decoded.pieces, codings)
    if scrubbed is None:
        if plain is not None:
            found.append("scrubbed:response.chunks")
        return plain
    found.append(f"scrubbed:response.chunks (decoded, scrubbed and {'+'.join(codings)}-encoded again)")
    if decoded.error is not None:
        # What followed the fault cannot be decoded: it is dropped rather than kept unsearched.
        found.append("response.chunks: undecodable rest dropped")
    return encode_reads(scrubbed, codings)


def _is_event_stream(headers: Sequence[Sequence[str]]) -> bool:
    return any(k.lower() == "content-type" and "text/event-stream" in v.lower() for k, v in headers)


def fix_content_length(headers: list[list[str]], length: int) -> None:
    """A body changed by redaction keeps its Content-Length true, so a replay's client reads it whole."""
    for header in headers:
        if header[0].lower() == "content-length":
            header[1] = str(length)


_QUOTED = re.compile(r"""b?['"]""")
_HEADER_LINE = re.compile(r"b'([A-Za-z0-9!#$%&*+.^_`|~-]{1,64}):")


def describe_bad_request(message: str | None) -> str:
    """What was wrong with a request the HTTP parser refused, without the bytes it quotes: a header line with a
    control character holds the header's value, often a key. The first line's words, and the header's name."""
    text = (message or "").strip()
    first = _QUOTED.split(text.splitlines()[0] if text else "")[0].strip().rstrip(":").strip()
    header = _HEADER_LINE.search(text)
    if header is not None:
        first += f" (header {header.group(1)})"
    return first or "malformed request"


# -- the record ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Redactor:
    """What counts as secret: header names (case-insensitive), JSON request body field names (case-insensitive, any
    depth), query parameter names (case-insensitive), and values given up front (the proxy's keys)."""

    headers: frozenset[str] = DEFAULT_SECRET_HEADERS
    # Fields redacted when they hold a string (DEFAULT_SECRET_FIELDS), and fields redacted whatever they hold (given).
    json_fields: frozenset[str] = frozenset()
    string_fields: frozenset[str] = DEFAULT_SECRET_FIELDS
    query_params: frozenset[str] = SECRET_QUERY_PARAMS
    extra_values: tuple[str, ...] = field(default=())

    @classmethod
    def with_extra(
        cls, headers: Iterable[str] = (), json_fields: Iterable[str] = (), values: Iterable[str] = ()
    ) -> Redactor:
        return cls(
            headers=DEFAULT_SECRET_HEADERS | {h.lower() for h in headers},
            json_fields=frozenset(f.lower() for f in json_fields),
            extra_values=tuple(v for v in values if v),
        )

    def redact_exchange(self, record: Exchange) -> Exchange:
        """Return the record with secrets removed; `redacted` lists what was removed (never the values)."""
        for _ in self.redact_steps(record):
            pass
        return record

    def body_scrubber(
        self,
        request_headers: Sequence[Sequence[str]],
        query: str,
        body: bytes,
        response_headers: Sequence[Sequence[str]],
    ) -> BodyScrubber:
        """What scrubs a response body written in parts while its exchange runs: the secrets are the ones
        `redact_steps` will find in the record (the request and response heads are known before the body)."""
        found: list[str] = []
        secrets = SecretSet(self.extra_values)
        redact_headers(request_headers, self.headers, "request", found, secrets)
        redact_query(query, self.query_params, found, secrets)
        if body:
            redact_json_fields(body, self.string_fields, self.json_fields, found, secrets)
        redact_headers(response_headers, self.headers, "response", found, secrets)
        return BodyScrubber(secrets.forms())

    def redact_steps(self, record: Exchange, spilled_bytes: int = 0, spill_scrubbed: bool = False) -> Iterator[None]:
        """`redact_exchange` in steps, yielding between them (an event loop runs other work there): the secrets
        replaced where they stand; the reads scrubbed (the longest step: every form searched through the body);
        the rest of the record searched. `spilled_bytes` of the body were written in parts before (scrubbed by a
        `BodyScrubber`, which found a secret if `spill_scrubbed`): Content-Length counts them too."""
        found: list[str] = []
        if spill_scrubbed:
            found.append("scrubbed:response.chunks")
        secrets = SecretSet(self.extra_values)
        request, response = record.request, record.response
        request.headers = redact_headers(request.headers, self.headers, "request", found, secrets)
        request.query = redact_query(request.query, self.query_params, found, secrets)
        if request.body:
            request.body = redact_json_fields(request.body, self.string_fields, self.json_fields, found, secrets)
        response.headers = redact_headers(response.headers, self.headers, "response", found, secrets)
        forms = secrets.forms()
        if forms:
            yield
            # The reads are searched joined (a secret split across two reads is found) and, for a compressed body,
            # decoded.
            scrubbed = yield from scrub_body_steps(response.headers, response.chunks, forms, found, secrets.values)
            if scrubbed is not None:
                response.chunks = scrubbed
            if scrubbed is not None or spill_scrubbed:
                fix_content_length(response.headers, spilled_bytes + sum(map(len, response.chunks)))
            yield
            self._scrub_rest(record, forms, found)
        if found:
            record.redacted = sorted(set(record.redacted) | set(found))

    def _scrub_rest(self, record: Exchange, forms: list[bytes], found: list[str]) -> None:
        # Searching packed bytes is ~10x cheaper than walking every string of a record, and an upstream that echoes a
        # key is rare: walk only when a secret is there. The reads were searched above: the rest is packed without
        # them (~1 us for a chat request; the searches cost several times that, packing less would save nothing).
        response = record.response
        chunks = response.chunks
        response.chunks = []
        try:
            blob = encode(record)
        finally:
            response.chunks = chunks
        if _holds_any(blob, forms):
            strs = [f.decode("utf-8", "replace") for f in forms]
            for name in record.__struct_fields__:
                if name == "response":
                    for rname in response.__struct_fields__:
                        if rname != "chunks":
                            value = scrub_text(getattr(response, rname), forms, strs, found, f"response.{rname}.")
                            setattr(response, rname, value)
                elif name != "redacted":
                    setattr(record, name, scrub_text(getattr(record, name), forms, strs, found, f"{name}."))


# -- secrets split across events ------------------------------------------------------------------------------------
# An upstream that echoes a key token by token never has the key's bytes in one place: each SSE event holds a piece,
# and only the text the client assembles holds it whole. The text fields a client joins across events (chat deltas'
# content, reasoning and tool-call arguments, legacy completions' text, the Responses API's deltas and refusals):
_TEXT_KEYS = frozenset({"content", "text", "delta", "arguments", "reasoning_content", "reasoning", "refusal"})
_TEXT_PIECE = re.compile(
    rb'"(?:content|text|delta|arguments|reasoning_content|reasoning|refusal)"\s*:\s*"((?:[^"\\]|\\.)*)"'
)
# A `data:` line holding one JSON object: the framing of every OpenAI-compatible stream.
_DATA_LINE = re.compile(rb"^data: ?(\{.*?)\r?$", re.MULTILINE)


def _unescaped(piece: bytes) -> str:
    if b"\\" not in piece:
        return piece.decode("utf-8", "replace")
    try:
        text: str = orjson.loads(b'"' + piece + b'"')
    except orjson.JSONDecodeError:
        return piece.decode("utf-8", "replace")
    return text


def scrub_split_secrets(reads: Sequence[bytes], values: Iterable[str]) -> list[bytes] | None:
    """A stream's reads with every secret the client would assemble from text pieces of several events removed, or
    None if there is none. A quick look first (each value as a subsequence of the text fields' values joined);
    only on a hit are the events parsed, each text field followed across events (per choice, tool call, output
    item), and every event that carries a piece of the secret written again: its piece's part of the secret becomes
    the marker in the event where the secret begins, and nothing in the others. Each event keeps its read (and its
    arrival time). Events whose data spans several `data:` lines are not followed."""
    secrets = [v for v in values if len(v) >= MIN_SCRUB_LEN]
    if not secrets:
        return None
    body = b"".join(reads)
    pieces: list[bytes] = _TEXT_PIECE.findall(body)
    joined = b"".join(pieces)
    if b"\\" in joined:
        joined = "".join(map(_unescaped, pieces)).encode()
    # The fields of several channels (content and a tool call's arguments, two choices) may come interleaved: a key
    # split in one of them is a subsequence of them all joined. (Bytes, and one search per character: this look
    # costs ~1 us per event of every stream recorded while a secret is known.)
    if not any(_subsequence(v.encode(), joined) for v in secrets):
        return None
    events: list[tuple[int, int, Any]] = []  # (start, end) of each data line's JSON in the body, and its value
    for m in _DATA_LINE.finditer(body):
        try:
            events.append((m.start(1), m.end(1), orjson.loads(m.group(1))))
        except orjson.JSONDecodeError:
            continue
    changed = _cut_pieces([doc for _, _, doc in events], secrets)
    if not changed:
        return None
    replaced = [(events[i][0], events[i][1], orjson.dumps(events[i][2])) for i in sorted(changed)]
    return _replace(reads, replaced)


def _subsequence(value: bytes, text: bytes) -> bool:
    """Whether the bytes of `value` occur in `text` in order (one search per byte)."""
    pos = -1
    for byte in value:
        pos = text.find(byte, pos + 1)
        if pos < 0:
            return False
    return True


def _cut_pieces(docs: list[Any], secrets: list[str]) -> set[int]:
    """Find each secret in every text channel assembled across `docs`, and cut it out of the pieces (in place);
    returns the indexes of the docs changed."""
    channels: dict[tuple[Any, ...], list[tuple[int, Any, Any]]] = {}  # channel -> (doc, container, key) in order
    for n, doc in enumerate(docs):
        for channel, container, key in _text_leaves(doc):
            channels.setdefault(channel, []).append((n, container, key))
    changed: set[int] = set()
    for leaves in channels.values():
        text = "".join(c[k] for _, c, k in leaves)
        cuts: list[tuple[int, int]] = []
        for value in secrets:
            i = text.find(value)
            while i >= 0:
                cuts.append((i, i + len(value)))
                i = text.find(value, i + len(value))
        if not cuts:
            continue
        pos = 0
        for n, container, key in leaves:
            piece = container[key]
            end = pos + len(piece)
            kept, cur = [], pos
            for s, e in sorted(cuts):
                if e <= pos or s >= end:
                    continue
                kept.append(piece[cur - pos : max(s, pos) - pos])
                if s >= pos:
                    kept.append(REDACTED)  # the secret begins in this piece: the marker stands where it began
                cur = max(cur, min(e, end))
            if cur != pos or kept:
                container[key] = "".join(kept) + piece[cur - pos :]
                changed.add(n)
            pos = end
    return changed


def _text_leaves(doc: Any) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """(channel, container, key) of each text field in an event, in order: the channel names where the field is (its
    path, a list element by its own `index` when it has one, the event's output item and content part when it
    names them), so that pieces of one text are joined with each other only."""
    top: tuple[Any, ...] = ()
    if isinstance(doc, dict):
        top = (doc.get("item_id"), doc.get("output_index"), doc.get("content_index"))
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, top)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            items = list(node.items())
            for key, value in reversed(items):
                if isinstance(value, str) and key in _TEXT_KEYS:
                    yield (*path, key), node, key
                elif isinstance(value, dict | list):
                    stack.append((value, (*path, key)))
        elif isinstance(node, list):
            for i in range(len(node) - 1, -1, -1):
                value = node[i]
                if isinstance(value, dict | list):
                    index = value.get("index", i) if isinstance(value, dict) else i
                    stack.append((value, (*path, index)))


def _replace(reads: Sequence[bytes], spans: Sequence[tuple[int, int, bytes]]) -> list[bytes]:
    """The reads with each (start, end) span of their joined bytes (sorted, not overlapping) replaced: the new bytes
    go in the read where the span began, the rest of the span leaves the reads after it (which may become empty).
    No read moves, so each keeps its arrival time, and no SSE event boundary moves."""
    out: list[bytes] = []
    pos = 0
    si = 0
    for read in reads:
        end = pos + len(read)
        piece = bytearray()
        cur = pos
        while cur < end:
            while si < len(spans) and spans[si][1] <= cur:
                si += 1
            if si < len(spans) and spans[si][0] < end:
                s, e, new = spans[si]
                if s > cur:
                    piece += read[cur - pos : s - pos]
                    cur = s
                if s == cur:
                    piece += new
                cur = min(e, end)
            else:
                piece += read[cur - pos :]
                cur = end
        out.append(bytes(piece))
        pos = end
    return out
