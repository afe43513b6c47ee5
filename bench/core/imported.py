"""Traffic recorded by other tools, as typed exchanges: OpenTelemetry GenAI traces (OTLP JSON files) and OpenAI-format
request logs (JSON Lines). Two readers use them: a load workload (each request sent again at its recorded offset:
`method`, `path`, `body`, `at_us`, named as `bench load`'s LoadRequest names them) and `bench catalog from-traffic`
(each request with the answer it got, grouped by session, drafted into tests).

The types and the reading of JSON files are here; bench.core.traffic_files reads a list of files, each with its
reader (bench.core.otlp_traces, bench.core.request_logs). What a file holds is untrusted: a line over MAX_LINE is
refused before it is parsed, a value that is not JSON is a one-line error naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import orjson

from bench.core.errors import BenchError

MAX_LINE = 64 << 20  # a JSON line (or a whole OTLP JSON document) larger than this is not traffic bench reads


class ImportedCall(msgspec.Struct, frozen=True, gc=False):
    name: str
    arguments: str = "{}"  # the JSON text of the arguments, as the API carries them
    id: str | None = None


class ImportedAnswer(msgspec.Struct, frozen=True, gc=False):
    """What the request got back, as far as the file says."""

    content: str = ""
    tool_calls: tuple[ImportedCall, ...] = ()
    finish_reason: str | None = None
    ok: bool = True  # no error recorded for it


class ImportedExchange(msgspec.Struct, frozen=True, gc=False):
    """One request (to send again byte for byte) and, when known, its answer."""

    path: str  # e.g. /v1/chat/completions
    body: bytes  # the request's JSON body
    method: str = "POST"
    # Microseconds after the first request of the files read (None: the file gave no time).
    at_us: int | None = None
    origin: str = ""  # FILE:LINE, or FILE:trace/span
    model: str | None = None
    session: str | None = None  # the conversation it belongs to (conversation id, trace id, session field)
    answer: ImportedAnswer | None = None
    started_us: int | None = None  # its start, microseconds since the Unix epoch, when the file gave one


def json_lines(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, JSON value) of each non-empty line; a file whose first line is not JSON by itself (an OTLP export
    written pretty) is read as one JSON document. One-line errors naming FILE:LINE."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise BenchError(f"{path}: cannot read it ({exc.strerror}); give a trace or request log file") from None
    with handle:
        first = handle.readline(MAX_LINE + 1)
        handle.seek(0)
        try:
            orjson.loads(first)
        except orjson.JSONDecodeError:
            data = handle.read(MAX_LINE + 1)
            if len(data) > MAX_LINE:
                raise BenchError(f"{path}: a JSON document over {MAX_LINE >> 20} MiB; write it as JSON Lines") from None
            yield 1, _loads(data, f"{path}")
            return
        number = 0
        while line := handle.readline(MAX_LINE + 1):  # bounded: a line is never read past MAX_LINE
            number += 1
            if len(line) > MAX_LINE:
                raise BenchError(f"{path}:{number}: a line over {MAX_LINE >> 20} MiB; is this JSON Lines?")
            if line.strip():
                yield number, _loads(line, f"{path}:{number}")


def _loads(data: bytes, where: str) -> object:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BenchError(f"{where}: not JSON ({exc}); give OTLP JSON traces or a JSON Lines request log") from None


def chat_body(
    model: str | None, messages: list[dict[str, object]], tools: list[dict[str, object]], params: dict[str, object]
) -> bytes:
    """A Chat Completions request body from what a trace says of the request."""
    body: dict[str, object] = {}
    if model:
        body["model"] = model
    body["messages"] = messages
    if tools:
        body["tools"] = tools
    body.update(params)
    return orjson.dumps(body)
