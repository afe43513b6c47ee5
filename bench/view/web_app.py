"""The aiohttp app of `bench view`: a JSON API over the index and the static single page that draws it."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any

import msgspec
from aiohttp import web

from bench.core.errors import BenchError
from bench.view.detail import detail, one_call, raw_bytes
from bench.view.export import csv_chunks
from bench.view.index import Index
from bench.view.live import Live
from bench.view.paging import Query, page, parse_query, select
from bench.view.search import SearchState
from bench.view.side_by_side import Side, compare, pair

INDEX_KEY = web.AppKey("index", Index)
LIVE_KEY = web.AppKey("live", Live)
CHANGED_KEY = web.AppKey("changed", asyncio.Condition)
POLL_S = 0.2  # how often the followed folder is read (--follow)
STATS_S = 2.0  # a live page gets the figures at least this often (rates change as time passes)
TOKEN_KEY = web.AppKey("token", str)
HOSTS_KEY = web.AppKey("hosts", frozenset)
# Names a browser on this machine reaches a loopback server by. Any other Host is a page of another origin whose name
# was made to resolve to 127.0.0.1 (DNS rebinding): it could read every result if the server answered it.
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})
# Digits a number parameter may have: int() of thousands of digits is slow, and Python's own message about it is not
# ours to show.
MAX_DIGITS = 9
COOKIE = "bench_view_token"
STATIC = resources.files("bench.view") / "static"
_encoder = msgspec.json.Encoder()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(value: Any) -> web.Response:
    return web.Response(body=_encoder.encode(value), content_type="application/json")


def _bad(message: str, status: int = 400) -> web.Response:
    return web.Response(body=_encoder.encode({"error": message}), status=status, content_type="application/json")


def host_name(header: str) -> str:
    """The name part of a Host header (`name`, `name:port`, `[v6]:port`), lowercased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@web.middleware
async def _host_gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bound to loopback, the server answers loopback names and its own address only (421 to any other Host)."""
    hosts = request.app.get(HOSTS_KEY)
    if hosts is not None and host_name(request.headers.get("Host", "")) not in hosts:
        return _bad(
            "this server answers only to its loopback address (127.0.0.1 or localhost): open the URL `bench view` "
            "printed",
            421,
        )
    return await handler(request)


@web.middleware
async def _own_words(request: web.Request, handler: Handler) -> web.StreamResponse:
    """An error nobody expected is said in bench's words (the terminal gets the traceback), never Python's."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        request.app.logger.exception("bench view: error while answering %s", request.path)
        return _bad("bench view could not answer this request; its terminal shows why", 500)


@web.middleware
async def _token_gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With a token, every request carries it: ?token= once (then a cookie), or an Authorization bearer header."""
    token = request.app.get(TOKEN_KEY)
    if not token:
        return await handler(request)
    header = request.headers.get("Authorization", "")
    given = request.query.get("token") or request.cookies.get(COOKIE) or header.removeprefix("Bearer ")
    if not hmac.compare_digest(given.encode(), token.encode()):
        return _bad("missing or wrong token: open the URL `bench view` printed (it carries ?token=)", 401)
    response = await handler(request)
    if request.query.get("token"):
        response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
    return response


def _int(request: web.Request, name: str) -> int:
    text = request.query.get(name, "")
    if not text.lstrip("-").isdigit() or len(text) > MAX_DIGITS:
        raise ValueError(f"{name}={text[:20]!r}: give a whole number of at most {MAX_DIGITS} digits")
    return int(text)


def _result_n(request: web.Request) -> int:
    q = request.query
    for name in ("run", "model", "test"):
        if name not in q:
            raise ValueError(f"missing {name}=: a result is named by run, model, test and epoch")
    return request.app[INDEX_KEY].find(q["run"], q["model"], q["test"], _int(request, "epoch"))


async def page_html(request: web.Request) -> web.StreamResponse:
    return web.Response(body=(STATIC / "index.html").read_bytes(), content_type="text/html")


async def static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    types = {".js": "text/javascript", ".css": "text/css", ".txt": "text/plain"}
    kind = next((t for ext, t in types.items() if name.endswith(ext)), None)
    item = STATIC / name
    if kind is None or "/" in name or not item.is_file():
        return _bad(f"no asset {name!r}", 404)
    return web.Response(body=item.read_bytes(), content_type=kind)


async def runs(request: web.Request) -> web.StreamResponse:
    index = request.app[INDEX_KEY]
    live = request.app.get(LIVE_KEY)
    body = {"runs": index.runs, "facets": index.facets, "warnings": index.warnings}
    return _json({**body, "live": str(live.folder) if live is not None else None})


async def _text_matches(index: Index, query: Query) -> tuple[bytearray | None, dict[int, str], SearchState | None]:
    """With words to look for: which results' prompts or answers hold them (a scan in a worker thread)."""
    if query.q is None:
        return None, {}, None
    found, state = await asyncio.to_thread(index.search.find, query.q)
    return found.rows, found.snippets, state


async def results(request: web.Request) -> web.StreamResponse:
    try:
        query = parse_query(request.query)
    except ValueError as exc:
        return _bad(str(exc))
    index = request.app[INDEX_KEY]
    text, snippets, state = await _text_matches(index, query)
    shown = page(index.rows, query, text)
    shown.search = state
    shown.snippets = {r.n: snippets[r.n] for r in shown.rows if r.n in snippets}
    return _json(shown)


async def results_csv(request: web.Request) -> web.StreamResponse:
    """Every row the filters keep, sorted as asked, as CSV (offset and limit do not apply)."""
    try:
        query = parse_query({k: v for k, v in request.query.items() if k not in ("offset", "limit")})
    except ValueError as exc:
        return _bad(str(exc))
    index = request.app[INDEX_KEY]
    text, _, _ = await _text_matches(index, query)
    rows = select(index.rows, query, text)
    response = web.StreamResponse(
        headers={"Content-Type": "text/csv; charset=utf-8", "Content-Disposition": 'attachment; filename="results.csv"'}
    )
    await response.prepare(request)
    for chunk in csv_chunks(rows):
        await response.write(chunk)
    await response.write_eof()
    return response


async def _in_thread(work: Callable[[], Any]) -> web.Response:
    """`work`'s answer as JSON, computed in a worker thread: reading a cassette (indexing it, the first time) must
    not stall the results table. ValueError is a bad parameter (400), KeyError an unknown result (404)."""
    try:
        return _json(await asyncio.to_thread(work))
    except ValueError as exc:
        return _bad(str(exc))
    except KeyError as exc:
        return _bad(str(exc.args[0]), 404)
    except BenchError as exc:
        return _bad(str(exc), 500)


async def result(request: web.Request) -> web.StreamResponse:
    return await _in_thread(lambda: detail(request.app[INDEX_KEY], _result_n(request)))


async def raw(request: web.Request) -> web.StreamResponse:
    part = request.query.get("part") or "response"
    if part not in ("request", "response"):
        return _bad(f"part={part[:20]!r}: use request or response")
    try:
        n = _result_n(request)
        body = await asyncio.to_thread(raw_bytes, request.app[INDEX_KEY], n, request.query.get("id", ""), part)
    except ValueError as exc:
        return _bad(str(exc))
    except KeyError as exc:
        return _bad(str(exc.args[0]), 404)
    except BenchError as exc:
        return _bad(str(exc), 500)
    if body is None:
        return _bad(f"exchange {request.query.get('id', '')!r} is not one of this result's", 404)
    # The bytes as recorded; shown as text so a click on "raw" reads them in the browser (never as HTML).
    return web.Response(body=body, content_type="text/plain", charset="utf-8")


async def load_levels(request: web.Request) -> web.StreamResponse:
    index = request.app[INDEX_KEY]
    return _json({"sources": index.load.pages([s.source for s in index.sources])})


async def load_chart(request: web.Request) -> web.StreamResponse:
    try:
        source = _int(request, "source")
    except ValueError as exc:
        return _bad(str(exc))
    chart = request.app[INDEX_KEY].load.chart(source, request.query.get("chart", ""))
    if chart is None:
        return _bad("no such load chart: see /api/load for each source's charts", 404)
    return web.Response(body=chart.encode(), content_type="image/svg+xml")


async def compare_view(request: web.Request) -> web.StreamResponse:
    q = request.query
    # A run id may be empty (traffic scored by rules has none): present is what counts.
    missing = [k for k in ("a_run", "a_model", "b_run", "b_model") if k not in q]
    if missing:
        return _bad(f"missing {', '.join(missing)}: compare names two sides, each a run and a model")
    try:
        return _json(compare(request.app[INDEX_KEY], Side(q["a_run"], q["a_model"]), Side(q["b_run"], q["b_model"])))
    except KeyError as exc:
        return _bad(str(exc.args[0]), 404)


async def pair_view(request: web.Request) -> web.StreamResponse:
    q = request.query
    missing = [k for k in ("a_run", "a_model", "b_run", "b_model", "test") if k not in q]
    if missing:
        return _bad(f"missing {', '.join(missing)}: side by side names two sides (a run and a model each) and a test")
    a, b = Side(q["a_run"], q["a_model"]), Side(q["b_run"], q["b_model"])
    return await _in_thread(lambda: pair(request.app[INDEX_KEY], a, b, q["test"], _int(request, "epoch")))


def _live(request: web.Request) -> Live:
    live = request.app.get(LIVE_KEY)
    if live is None:
        raise KeyError("not following a folder: start bench view with --follow DIR")
    return live


async def live_flows(request: web.Request) -> web.StreamResponse:
    """The flows read after `after` (the last 500), and the figures now: for scripts (the page uses the events)."""
    try:
        flows, stats = _live(request).after(_int(request, "after") if "after" in request.query else 0)
    except ValueError as exc:
        return _bad(str(exc))
    except KeyError as exc:
        return _bad(str(exc.args[0]), 404)
    return _json({"flows": flows, "stats": stats})


async def live_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: the flows after `after` (or the browser's Last-Event-ID when it reconnects), then new
    ones as the folder is read, and the figures at least every STATS_S."""
    try:
        live = _live(request)
        last = request.headers.get("Last-Event-ID") or request.query.get("after") or "0"
        if not last.isdigit() or len(last) > MAX_DIGITS:
            raise ValueError(f"after={last[:20]!r}: give a whole number of at most {MAX_DIGITS} digits")
        after = int(last)
    except ValueError as exc:
        return _bad(str(exc))
    except KeyError as exc:
        return _bad(str(exc.args[0]), 404)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    changed = request.app[CHANGED_KEY]
    try:
        while True:
            flows, stats = live.after(after)
            after = flows[-1].seq if flows else after
            data = _encoder.encode({"flows": flows, "stats": stats})
            await response.write(b"id: %d\nevent: flows\ndata: %s\n\n" % (after, data))
            async with changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), STATS_S)
    except ConnectionError:
        return response  # the page went away


async def flow(request: web.Request) -> web.StreamResponse:
    """One live flow's exchange (`part=request|response`: its raw bytes)."""
    q = request.query
    part = q.get("part")
    if part not in (None, "request", "response"):
        return _bad(f"part={part[:20]!r}: use request or response")
    try:
        live = _live(request)
        record = await asyncio.to_thread(live.record, q.get("cassette", ""), q.get("id", ""))
    except KeyError as exc:
        return _bad(str(exc.args[0]), 404)
    except BenchError as exc:
        return _bad(str(exc), 500)
    if record is None:
        return _bad(f"no exchange {q.get('id', '')[:80]!r} in a followed cassette {q.get('cassette', '')[:200]!r}", 404)
    if part is not None:
        body = record.request.body if part == "request" else b"".join(record.response.chunks)
        return web.Response(body=body, content_type="text/plain", charset="utf-8")
    return _json(await asyncio.to_thread(one_call, record, request.app[INDEX_KEY].prices))


async def _follow(app: web.Application) -> AsyncIterator[None]:
    """While the server runs: read the followed folder every POLL_S and wake the live pages when it grew."""
    live = app.get(LIVE_KEY)
    if live is None:
        yield
        return
    changed = app[CHANGED_KEY]

    async def follow() -> None:
        while True:
            try:
                new = await asyncio.to_thread(live.poll)
            except Exception:
                app.logger.exception("bench view: error while reading the followed folder")
                new = 0
            if new:
                async with changed:
                    changed.notify_all()
            await asyncio.sleep(POLL_S)

    task = asyncio.create_task(follow())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def make_app(
    index: Index, token: str | None = None, hosts: frozenset[str] | None = None, live: Live | None = None
) -> web.Application:
    """`hosts`: the Host names answered (None: any, for a server bound beyond loopback, which needs a token)."""
    app = web.Application(middlewares=[_own_words, _host_gate, _token_gate])
    app[INDEX_KEY] = index
    if token:
        app[TOKEN_KEY] = token
    if hosts is not None:
        app[HOSTS_KEY] = hosts
    if live is not None:
        app[LIVE_KEY] = live
        app[CHANGED_KEY] = asyncio.Condition()
    app.cleanup_ctx.append(_follow)
    app.router.add_get("/", page_html)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/runs", runs)
    app.router.add_get("/api/results", results)
    app.router.add_get("/api/results.csv", results_csv)
    app.router.add_get("/api/result", result)
    app.router.add_get("/api/raw", raw)
    app.router.add_get("/api/compare", compare_view)
    app.router.add_get("/api/pair", pair_view)
    app.router.add_get("/api/live", live_flows)
    app.router.add_get("/api/live/events", live_events)
    app.router.add_get("/api/flow", flow)
    app.router.add_get("/api/load", load_levels)
    app.router.add_get("/api/load_chart", load_chart)
    return app
