"""`bench cassette ls|show|export`: read cassettes without the proxy (this module never imports aiohttp).

Cassettes are compressed, so they cannot be reviewed in git or grepped; these commands are how a person looks
inside: a line per file, one exchange in words, or every exchange as JSON lines or HAR 1.2 for browser tools.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar
from urllib.parse import parse_qsl

import msgspec
import orjson

from bench import __version__
from bench.core.cassette.reader import CassetteReader, find_cassettes
from bench.core.cassette.reader import find_locations as find
from bench.core.cassette.records import Exchange, Timing
from bench.core.decoding import decoded_record_reads
from bench.core.errors import BenchError, CassetteError
from bench.core.storage import Location, location, size

if TYPE_CHECKING:
    from bench.core.parsed import ParsedExchange

PREVIEW_CHARS = 600


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    p = subparsers.add_parser("cassette", help="list, show and export recorded cassettes")
    sub = p.add_subparsers(dest="cassette_command", metavar="ACTION", required=True)

    ls = sub.add_parser("ls", help="one line per cassette: exchanges, models, time span, size, compression ratio")
    ls.add_argument(
        "paths",
        nargs="*",
        type=location,
        default=[Path("cassettes")],
        metavar="DIR",
        help="folders, files or object-storage URLs (default: cassettes)",
    )
    ls.set_defaults(handler=cmd_ls)

    show = sub.add_parser("show", help="one exchange, readable: request, timing, assembled text and tool calls")
    show.add_argument("file", type=location, metavar="FILE")
    show.add_argument("--id", help="exchange id, e.g. x3 (default: the first)")
    show.set_defaults(handler=cmd_show)

    export = sub.add_parser("export", help="every exchange as JSON lines or as a HAR 1.2 file")
    export.add_argument("file", type=location, metavar="FILE")
    export.add_argument("--format", choices=("jsonl", "har"), default="jsonl")
    export.add_argument("-o", "--output", type=Path, help="write here instead of standard output")
    export.set_defaults(handler=cmd_export)

    up = sub.add_parser(
        "upgrade",
        help="rewrite cassettes of an older format version as the current one (each verified before it is replaced)",
    )
    up.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="cassette files or folders of them")
    up.set_defaults(handler=cmd_upgrade)


# -- helpers --------------------------------------------------------------------------------------------------------


def _name(path: Location) -> str:
    return path.rsplit("/", 1)[-1] if isinstance(path, str) else path.name


def _open(path: Location) -> CassetteReader:
    if isinstance(path, Path) and path.is_dir():
        raise BenchError(f"{path} is a folder; pass one .cassette file (bench cassette ls {path} lists them)")
    return CassetteReader(path)


def _warn_if_cut(reader: CassetteReader) -> None:
    if reader.problem is not None:
        print(f"bench: warning: {reader.problem}; showing what was read", file=sys.stderr)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(us: float) -> str:
    s = us / 1e6
    if s < 1:
        return f"{us / 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    return f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def traffic_bytes(record: Exchange) -> int:
    """Body bytes that crossed the proxy for this exchange (request body and response reads)."""
    response = record.response
    raw = response.raw_bytes or sum(map(len, response.chunks))
    return raw + len(record.request.body)


# -- ls -------------------------------------------------------------------------------------------------------------


def cmd_ls(args: argparse.Namespace) -> int:
    files = find(args.paths)
    if not files:
        where = ", ".join(str(p) for p in args.paths)
        print(f"no cassettes in {where}", file=sys.stderr)
        return 0
    return _each(files, _ls_line, CassetteError)


P = TypeVar("P")


def _each(files: Sequence[P], line: Callable[[P], str], error: type[BenchError]) -> int:
    """One line per file; a file that fails gets its one-line error and the others go on. Exit status 1 if any did."""
    failed = 0
    for path in files:
        try:
            print(line(path))
        except error as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _ls_line(path: Location) -> str:
    reader = CassetteReader(path)
    n = 0
    raw = 0
    models: Counter[str] = Counter()
    first: int | None = None
    last: int | None = None
    for record in reader:
        n += 1
        raw += traffic_bytes(record)
        model = record.upstream.model or _request_model(record)
        if model:
            models[model] += 1
        started = record.started
        end = started + record.timing.end
        first = started if first is None else min(first, started)
        last = end if last is None else max(last, end)
    disk = size(path)
    names = [m for m, _ in models.most_common(3)]
    model_text = ", ".join(names) + (f" +{len(models) - 3}" if len(models) > 3 else "") if names else "-"
    span = f"{_iso(first)} +{_duration((last or first) - first)}" if first is not None else "-"
    ratio = f"{raw / disk:.1f}x" if disk else "-"
    state = "" if not reader.truncated else f"  [{reader.error}]"
    mode = reader.header.settings.mode or "?"
    return (
        f"{path}  {n} exchange(s)  {mode}  models: {model_text}  {span}  {_size(disk)} on disk, "
        f"{_size(raw)} raw ({ratio}){state}"
    )


def _request_model(record: Exchange) -> str | None:
    try:
        body = orjson.loads(record.request.body)
    except orjson.JSONDecodeError:
        return None
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


# -- upgrade -------------------------------------------------------------------------------------------------------


def cmd_upgrade(args: argparse.Namespace) -> int:
    from bench.core.cassette.rewrite import upgrade_file

    files = find_cassettes(args.paths)
    if not files:
        raise BenchError(f"no cassettes in {', '.join(str(p) for p in args.paths)}")
    return _each(files, upgrade_file, BenchError)


# -- show -----------------------------------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    reader = _open(args.file)
    ids: list[str] = []
    chosen: Exchange | None = None
    for record in reader:
        ids.append(record.id)
        if chosen is None and (args.id is None or record.id == args.id):
            chosen = record
    _warn_if_cut(reader)
    if chosen is None:
        if not ids:
            raise BenchError(f"{args.file}: holds no exchanges")
        near = ", ".join(ids[:10]) + (" …" if len(ids) > 10 else "")
        raise BenchError(f"{args.file}: no exchange with id {args.id!r}; ids are {near}")
    sys.stdout.write(render_exchange(chosen, _name(reader.path), len(ids)))
    return 0


def _clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    text = text.replace("\r", "")
    return text if len(text) <= limit else text[:limit] + f" … (+{len(text) - limit} chars)"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def render_exchange(record: Exchange, cassette: str, total: int) -> str:
    from bench.core.parse import parse_exchange  # the lead's parser; only `show` needs it

    parsed = parse_exchange(record)
    lines = [
        *_head_lines(record, cassette, total),
        "request:",
        *_request_lines(record, parsed),
        "upstream:",
        *_upstream_lines(record),
        _timing_line(record),
        *_response_lines(record, parsed),
    ]
    if record.redacted:
        lines.append("redacted: " + ", ".join(record.redacted))
    return "\n".join(lines) + "\n"


def _head_lines(record: Exchange, cassette: str, total: int) -> list[str]:
    req, resp = record.request, record.response
    query = f"?{req.query}" if req.query else ""
    lines = [
        f"{record.id}  {req.method} {req.path}{query}  -> {resp.status}  "
        f"{record.outcome}  ({cassette}, {total} exchange(s))"
    ]
    head = [f"started {_iso(record.started)} UTC", f"mode {record.mode}"]
    if record.replay_of is not None:
        head.append(f"replay of {record.replay_of.id} in {record.replay_of.cassette}")
    lines.append("  " + ", ".join(head))
    if record.tags:
        lines.append("  tags: " + " ".join(f"{k}={v}" for k, v in sorted(record.tags.items())))
    if record.error:
        lines.append(f"  error: {record.error}")
    return lines


def _request_lines(record: Exchange, parsed: ParsedExchange) -> list[str]:
    body = parsed.request_json
    if body is None:
        return ["  " + _clip(record.request.body.decode("utf-8", "replace"))] if record.request.body else []
    facts = [f"model {body.get('model')}"]
    if body.get("stream"):
        facts.append("stream")
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    if tools:
        facts.append("tools: " + ", ".join(str(t) for t in tools))
    for key in ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "tool_choice"):
        if key in body:
            facts.append(f"{key} {body[key]}")
    lines = ["  " + ", ".join(facts)]
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            lines.append(f"  [{message.get('role')}] " + _clip(_message_text(message), 300).replace("\n", "\n    "))
    if "input" in body:
        lines.append("  input: " + _clip(str(body["input"]), 300))
    return lines


def _upstream_lines(record: Exchange) -> list[str]:
    upstream = record.upstream
    named = (
        ("model", upstream.model),
        ("system_fingerprint", upstream.system_fingerprint),
        ("server", upstream.server),
    )
    ident = [f"{k} {v}" for k, v in named if v]
    lines = ["  " + (", ".join(ident) or "-") + (f"  ({upstream.url})" if upstream.url else "")]
    lines.extend(f"  {name}: {value}" for name, value in sorted(upstream.headers.items()))
    return lines


def _timing_line(record: Exchange) -> str:
    timing = record.timing

    def ms(v: int | None) -> str:
        return "-" if v is None else f"{v / 1000:.1f} ms"

    return (
        f"timing: sent {ms(timing.sent_upstream)}, headers {ms(timing.headers)}, first byte {ms(timing.first_byte)}, "
        f"first token {ms(timing.first_token)}, end {ms(timing.end)}, proxy {ms(timing.proxy_us)}, "
        f"proxy's longest loop stall {ms(timing.loop_lag_us)}"
    )


def _response_lines(record: Exchange, parsed: ParsedExchange) -> list[str]:
    resp = record.response
    chunks = resp.chunks
    decoded = decoded_record_reads(resp.headers, chunks)
    size = f"{resp.raw_bytes or sum(map(len, chunks))} bytes"
    if decoded.codings:
        size += f" {'+'.join(decoded.codings)}, {len(decoded.body)} decoded"
    lines = [f"response: {'streamed' if resp.streamed else 'body'}, {len(chunks)} read(s), {size}"]
    if decoded.error:
        lines.append(f"  {decoded.error}")
    if parsed.reasoning:
        lines += ["reasoning:", _indent(_clip(parsed.reasoning))]
    if parsed.content:
        lines += ["content:", _indent(parsed.content)]
    if parsed.tool_calls:
        lines.append("tool calls:")
        for call in parsed.tool_calls:
            lines.append(f"  [{call.index}] {call.name}  id {call.id}")
            args = call.parsed_arguments
            lines.append(_indent(_clip(orjson.dumps(args).decode() if args is not None else call.arguments)))
    if not parsed.content and not parsed.tool_calls and not parsed.reasoning and chunks:
        lines += ["body:", _indent(_clip(decoded.body.decode("utf-8", "replace")))]
    tail = [f"finish_reason {parsed.finish_reason}"] if parsed.finish_reason else []
    if parsed.usage:
        tail.append("usage " + " ".join(f"{k}={v}" for k, v in parsed.usage.items() if not isinstance(v, dict)))
    if tail:
        lines.append(", ".join(tail))
    if parsed.findings:
        lines.append("findings: " + ", ".join(parsed.findings))
    return lines


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        parts = [str(p.get("text", f"<{p.get('type')}>")) for p in content if isinstance(p, dict)]
        text = " ".join(parts)
    else:
        text = "" if content is None else str(content)
    calls = message.get("tool_calls") or []
    for call in calls:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        text += f" <call {fn.get('name')}({fn.get('arguments')})>"
    return text.strip()


# -- export ---------------------------------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    reader = _open(args.file)
    if args.output is None:
        _export(reader, args.format, sys.stdout)
    else:
        with open(args.output, "w", encoding="utf-8") as out:
            _export(reader, args.format, out)
    _warn_if_cut(reader)
    return 0


def _export(reader: CassetteReader, fmt: str, out: TextIO) -> None:
    if fmt == "jsonl":
        for record in reader:
            out.write(orjson.dumps(jsonl_record(record), option=orjson.OPT_NON_STR_KEYS).decode() + "\n")
        return
    entries = [har_entry(record) for record in reader]
    har = {"log": {"version": "1.2", "creator": {"name": "bench", "version": __version__}, "entries": entries}}
    out.write(orjson.dumps(har, option=orjson.OPT_INDENT_2).decode() + "\n")


def jsonable(value: Any) -> Any:
    """The record as JSON: bytes become text when they are UTF-8, else {"base64": ...}."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, msgspec.Struct):
        # Every field, defaults too (a file leaves those out): an export shows the whole record.
        config = value.__struct_config__
        out: dict[str, Any] = {config.tag_field: config.tag} if config.tag_field is not None else {}
        for name in value.__struct_fields__:
            out[name] = jsonable(getattr(value, name))
        return out
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def jsonl_record(record: Exchange) -> Any:
    """The record as JSON; a compressed response also gets `response.decoded`, its body decoded (and
    `response.decode_error` if it could not be), since its recorded reads are the wire bytes."""
    out = jsonable(record)
    resp = record.response
    decoded = decoded_record_reads(resp.headers, resp.chunks)
    if decoded.codings:
        out["response"]["decoded"] = jsonable(decoded.body)
        if decoded.error:
            out["response"]["decode_error"] = decoded.error
    return out


def _har_headers(headers: list[list[str]]) -> list[dict[str, str]]:
    return [{"name": str(h[0]), "value": str(h[1])} for h in headers if len(h) == 2]


def _header(headers: list[list[str]], name: str) -> str:
    return next((str(h[1]) for h in headers if str(h[0]).lower() == name), "")


def _har_text(data: bytes, mime: str, wire: int | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"size": len(data), "mimeType": mime or "application/octet-stream"}
    if wire is not None:
        content["compression"] = len(data) - wire  # HAR 1.2: bytes saved by the Content-Encoding
    try:
        content["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        content["text"] = base64.b64encode(data).decode()
        content["encoding"] = "base64"
    return content


def _har_timings(timing: Timing) -> dict[str, float]:
    """HAR 1.2 requires send, wait and receive, non-negative (-1 is only for the optional phases), and `time` is
    their sum: a point the record lacks (a replay miss never went upstream) takes the one before it."""
    end_us = max(0, timing.end)
    sent_us = min(end_us, max(0, timing.sent_upstream or 0))
    first_us = timing.first_byte
    first_us = sent_us if first_us is None else min(end_us, max(sent_us, first_us))
    return {"send": sent_us / 1000, "wait": (first_us - sent_us) / 1000, "receive": (end_us - first_us) / 1000}


def har_entry(record: Exchange) -> dict[str, Any]:
    req = record.request
    resp = record.response
    timing = record.timing
    base = record.upstream.url or "http://bench-replay"
    query = req.query
    url = f"{base.rstrip('/')}{req.path or '/'}" + (f"?{query}" if query else "")
    req_headers = req.headers
    resp_headers = resp.headers
    body = req.body
    wire = b"".join(resp.chunks)
    # HAR's content.text is the decoded body; bodySize stays the bytes on the wire.
    decoded = decoded_record_reads(resp_headers, resp.chunks)
    data = decoded.body
    timings = _har_timings(timing)
    started = record.started
    entry: dict[str, Any] = {
        "startedDateTime": dt.datetime.fromtimestamp(started / 1e6, dt.UTC).isoformat().replace("+00:00", "Z"),
        "time": sum(timings.values()),
        "request": {
            "method": req.method or "GET",
            "url": url,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": _har_headers(req_headers),
            "queryString": [{"name": k, "value": v} for k, v in parse_qsl(query, keep_blank_values=True)],
            "headersSize": -1,
            "bodySize": len(body),
        },
        "response": {
            "status": resp.status or 0,
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": _har_headers(resp_headers),
            "content": _har_text(data, _header(resp_headers, "content-type"), len(wire) if decoded.codings else None),
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(wire),
        },
        "cache": {},
        "timings": timings,
        "_bench": {
            "id": record.id,
            "outcome": record.outcome,
            "error": record.error,
            "tags": record.tags,
            "fp": req.fp,
            "chunk_us": resp.chunk_us,
            "timing": jsonable(timing),
            "upstream": jsonable(record.upstream),
        },
    }
    if body:
        text = _har_text(body, _header(req_headers, "content-type"))
        entry["request"]["postData"] = {"mimeType": text["mimeType"], "text": text["text"]}
    return entry
