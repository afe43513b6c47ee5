"""Agent sessions: the exchanges one conversation made, linked from what each request and response say.

An agent or a multi-turn client sends several requests that bench records as unrelated exchanges. Three things tie
them together, in this order of trust:
- a Responses API request's `previous_response_id` names the answer it continues;
- a request carries the results of tool calls an earlier answer made (`tool_call_id` of chat `tool` messages,
  `call_id` of Responses `*_call_output` items): call ids are unique per answer at real providers;
- a client's own session id: a session header (SESSION_HEADERS), the trace id of a W3C `traceparent` header, or the
  Responses API's `conversation`.

`session_keys` reads those keys from one exchange when its traffic line is made (bench.scorer.traffic_lines), and
`response_id` the id its answer gives (kept with the parse: bench.scorer.answer_facts);
`SessionLinker` then walks the traffic lines in the scores file's order (cassette, start, id: a continuation starts
after the answer it continues) and gives each its session, written on the line (docs/scores-format.md). An exchange
nothing links to starts a session of its own. When two sessions reuse one id (a simulator's fixed ids, a replay of a
recording), the latest exchange that gave it wins, which is the one a continuation answers.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import msgspec
import orjson

from bench.core.cassette.records import Exchange, Response
from bench.core.decoding import decoded_record_reads
from bench.core.endpoints import RESPONSES
from bench.core.parsed import ParsedExchange
from bench.core.sse import event_payloads
from bench.scorer.results import ENCODER, TRAFFIC_DECODER, SessionKeys, TrafficLine

# Headers clients and gateways use for a session or conversation id (lower case). `traceparent` is read apart.
SESSION_HEADERS = (
    "x-session-id",
    "session-id",
    "session_id",
    "x-conversation-id",
    "conversation_id",
    "helicone-session-id",
)
_WANTED = frozenset((*SESSION_HEADERS, "traceparent"))
MAX_ID = 200  # longer ids are not ids any client sends: kept out of the keys
MAX_CALLS = 32  # call ids kept per request: the newest results, which an answer just before asked for
HEAD_READS = 8  # a streamed answer's id is in its first event: at most this many reads are looked at
MAX_BODY = 16 << 20  # a whole body larger than this is not read again for its id
LINKER_KEYS = 500_000  # ids the linker remembers (least recently used go first): ~100 MB at most


def _id(value: Any) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_ID and value.isprintable():
        return value
    return None


def session_keys(record: Exchange, parsed: ParsedExchange) -> SessionKeys:
    """What links the exchange to others (read from the request, its headers and the answer's tool calls)."""
    doc = parsed.request_json or {}
    responses = parsed.endpoint == RESPONSES
    return SessionKeys(
        previous_response_id=_id(doc.get("previous_response_id")) if responses else None,
        calls_in=_calls_in(doc, responses),
        calls_out=[c for c in (_id(call.id) for call in parsed.tool_calls) if c is not None],
        client_session=_client_session(record, doc if responses else {}),
    )


def _calls_in(doc: dict[str, Any], responses: bool) -> list[str]:
    items = doc.get("input") if responses else doc.get("messages")
    if not isinstance(items, list):
        return []
    found: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if responses:
            kind = item.get("type")
            call = item.get("call_id") if isinstance(kind, str) and kind.endswith("_call_output") else None
        else:
            call = item.get("tool_call_id") if item.get("role") == "tool" else None
        if (value := _id(call)) is not None:
            found.append(value)
    return found[-MAX_CALLS:]


def _client_session(record: Exchange, doc: dict[str, Any]) -> str | None:
    found: dict[str, str] = {}
    for pair in record.request.headers:  # one pass: this runs for every exchange of a rescore
        name = pair[0].lower() if len(pair) >= 2 and isinstance(pair[0], str) else ""
        if name in _WANTED and name not in found:
            found[name] = str(pair[1])
    if found:
        for name in SESSION_HEADERS:
            if (value := _id(found.get(name))) is not None:
                return value
        parent = found.get("traceparent")
        if parent is not None:
            parts = parent.strip().split("-")
            if len(parts) == 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
                return f"trace:{parts[1]}"
    conversation = doc.get("conversation") if doc else None
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    return _id(conversation)


def _encoded(response: Response) -> bool:
    return any(len(p) >= 2 and isinstance(p[0], str) and p[0].lower() == "content-encoding" for p in response.headers)


def response_id(record: Exchange) -> str | None:
    """The id the upstream gave its answer (`chatcmpl-…`, `resp_…`): from the first event of a stream, else the
    body; None when there is none or the body cannot be read. The bytes are tried as recorded first (the headers are
    looked at only when that finds nothing): this runs for every exchange of a rescore."""
    response = record.response
    if response.status is None or response.status >= 400 or not response.chunks:
        return None
    if response.raw_bytes > MAX_BODY and not response.streamed:
        return None
    reads = response.chunks[:HEAD_READS] if response.streamed else response.chunks
    found = _first_id(reads, response.streamed)
    if found is None and _encoded(response):
        found = _first_id(decoded_record_reads(response.headers, reads).pieces, response.streamed)
    return found


def _first_id(reads: list[bytes], streamed: bool) -> str | None:
    if not streamed:
        return _payload_id(b"".join(reads))
    head = reads[0] if reads else b""
    payload = _whole_event(head)
    if payload is not None:
        found = _payload_id(payload)  # the usual first read: one whole event
        if found is not None:
            return found
    _, payloads, _ = event_payloads(reads, [0] * len(reads))
    return next(filter(None, map(_payload_id, payloads)), None)


def _whole_event(read: bytes) -> bytes | None:
    """The data of a read that is one whole event as servers frame them (`data: ...` LF LF, or the Responses API's
    `event: NAME` LF `data: ...` LF LF; no CR), else None."""
    if not read.endswith(b"\n\n") or b"\r" in read:
        return None
    if read.startswith(b"data: ") and read.count(b"\n") == 2:
        return read[6:-2]
    line = read.find(b"\n")
    if read.startswith(b"event: ") and read.count(b"\n") == 3 and read.startswith(b"data: ", line + 1):
        return read[line + 7 : -2]
    return None


def _payload_id(data: bytes) -> str | None:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    inner = doc.get("response")  # a Responses API event carries the response object
    if isinstance(inner, dict):
        return _id(inner.get("id"))
    return _id(doc.get("id"))


class Linkable(Protocol):
    """What the linker reads of a traffic line."""

    cassette: str
    id: str
    response_id: str | None
    session_keys: SessionKeys


def new_session(line: Linkable) -> str:
    """A session's id: the client's own when its first exchange gave one, else one derived from that exchange."""
    own = line.session_keys.client_session
    if own is not None:
        return own
    digest = hashlib.sha256(f"{line.cassette}\0{line.id}".encode()).hexdigest()
    return f"s-{digest[:16]}"


def _incoming(keys: SessionKeys) -> Iterator[tuple[str, str]]:
    if keys.previous_response_id is not None:
        yield "previous_response_id", f"r:{keys.previous_response_id}"
    for call in reversed(keys.calls_in):
        yield "tool_call", f"c:{call}"
    if keys.client_session is not None:
        yield "client_session", f"s:{keys.client_session}"


def _outgoing(line: Linkable) -> Iterator[str]:
    if line.response_id is not None:
        yield f"r:{line.response_id}"
    for call in line.session_keys.calls_out:
        yield f"c:{call}"
    if line.session_keys.client_session is not None:
        yield f"s:{line.session_keys.client_session}"


class SessionLinker:
    """Gives traffic lines their sessions, fed in the scores file's order."""

    def __init__(self, limit: int = LINKER_KEYS) -> None:
        self.limit = limit
        self.known: OrderedDict[str, str] = OrderedDict()

    def session(self, line: Linkable) -> tuple[str, str | None]:
        """The line's session and what linked it (None: it starts one), remembering what it gives later lines."""
        found: tuple[str, str | None] = (new_session(line), None)
        for how, key in _incoming(line.session_keys):
            session = self.known.get(key)
            if session is not None:
                found = (session, how)
                break
        for key in _outgoing(line):
            self.known[key] = found[0]
            self.known.move_to_end(key)
        while len(self.known) > self.limit:
            self.known.popitem(last=False)
        return found

    def link(self, line: TrafficLine) -> TrafficLine:
        line.session, line.session_link = self.session(line)
        return line

    def link_encoded(self, line: bytes) -> bytes:
        """A traffic line as the scores file holds it, given its session: only the fields the linker reads are
        decoded, and the two nulls the encoder wrote are replaced in place (the rest of the line is not re-encoded:
        a line can hold hundreds of gaps)."""
        part = _LINKABLE.decode(line)
        session, how = self.session(part)
        at = line.find(_NULL_SESSION)
        if at < 0 or line.find(_NULL_LINK) < 0:  # not a line this bench encoded with no session: encode it whole
            whole = TRAFFIC_DECODER.decode(line)
            whole.session, whole.session_link = session, how
            return ENCODER.encode(whole) + b"\n"
        line = (
            line[:at] + b'"session":' + ENCODER.encode(session) + b',"session_keys":' + line[at + len(_NULL_SESSION) :]
        )
        return line.replace(_NULL_LINK, b'"session_link":' + ENCODER.encode(how), 1)


class _Linkable(msgspec.Struct, gc=False):
    cassette: str = ""
    id: str = ""
    response_id: str | None = None
    session_keys: SessionKeys = msgspec.field(default_factory=SessionKeys)


_LINKABLE = msgspec.json.Decoder(_Linkable)
# With sorted keys, "session" is followed by "session_keys" (and "session_link" after it): written once, at the top
# level, by the encoder for a line with no session yet. A string value cannot hold them (its quotes are escaped).
_NULL_SESSION = b'"session":null,"session_keys":'
_NULL_LINK = b'"session_link":null'


def link_all(lines: Sequence[TrafficLine]) -> list[TrafficLine]:
    """Lines (in the scores file's order) with their sessions, for readers holding them all."""
    linker = SessionLinker()
    return [linker.link(line) for line in lines]
