"""The fault suite: how `bench proxy` and the cassette tools hold up against hostile load, clients and files.

    .venv/bin/python benchmarks/faults.py            # about 1-2 minutes on 2 cores
    .venv/bin/python benchmarks/faults.py --quick    # fewer streams, connections and damaged files

Everything runs on 127.0.0.1: a mock upstream in its own process, `bench proxy` as a real process, this process as
the clients. Four parts, one line of figures each:
  1. load: 1,000 concurrent paced streams through `bench proxy --mode record`; streams held (whole, byte-exact) and
     errors, exchanges recorded, and the proxy's peak RSS;
  2. slow clients: 1,000 connections (half silent, half trickling a request head at 1 byte/s) against the proxy's
     header timeout (short here: --header-timeout 2); how many the proxy still holds once the bound has passed
     (goal 0), and its open file descriptors before and after;
  3. secrets: a hostile upstream that echoes the keys it receives, split across two reads and percent-decoded, to
     proxies run with and without --upstream-key-env; every artifact a user can get (the decompressed cassette,
     `bench cassette show` of every exchange, `bench cassette export` as JSON lines and HAR, the proxy's output) is
     searched for either half of each key (goal 0);
  4. damaged files: the shipped recording with one byte flipped, or cut short, read by `bench cassette export`
     (and `bench cassette ls`, for tracebacks only): tracebacks (goal 0), and silent differences, i.e. an export that
     differs from the intact file's with exit code 0 and nothing said on stderr (goal 0).
The cassette tools are run through the public CLI (`bench.cli.main`), so the figures follow whatever the CLI does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import random
import re
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"
HEADER_TIMEOUT = 2.0

# Random keys; the hostile upstream echoes each one cut in the middle, in two reads. A leak is any 8-hex-digit block
# of a key's random part found in an artifact: wherever a key is cut, at least three of its four blocks stay whole.
UPSTREAM_KEY = "sk-faults-up-" + secrets.token_hex(16)
CLIENT_KEY = "sk-faults-client-" + secrets.token_hex(16)
QUERY_KEY = (secrets.token_hex(8), secrets.token_hex(8))  # sent as ?key=HALF1%2FHALF2, echoed as HALF1/HALF2


# -- the mock upstream (a subprocess) -------------------------------------------------------------------------------


def sse(content: str, finish: str | None = None) -> bytes:
    event = {"id": "chatcmpl-faults", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "mock"}
    event["choices"] = [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]  # type: ignore[assignment]
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


async def serve_upstream() -> None:
    from urllib.parse import unquote

    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body.get("x_echo"):
            return await echo(request, body)
        tokens, ttft, itl = int(body["x_tokens"]), float(body["x_ttft_ms"]) / 1000, float(body["x_itl_ms"]) / 1000
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        start = loop.time() + ttft
        for i in range(tokens):
            wait = start + i * itl - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await response.write(sse(f" w{i}"))
        await response.write(sse("", "stop") + b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def echo(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """Echo the Authorization it got and the `key` query parameter percent-decoded, each cut in two reads."""
        said = f"auth={request.headers.get('Authorization', '')} key={unquote(request.query.get('key', ''))}"
        stream = bool(body.get("stream"))
        ctype = "text/event-stream" if stream else "application/json"
        response = web.StreamResponse(headers={"Content-Type": ctype, "x-echo": said})
        await response.prepare(request)
        if stream:
            text = sse(f"you sent {said}") + sse("", "stop") + b"data: [DONE]\n\n"
        else:
            message = {"role": "assistant", "content": f"you sent {said}"}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            text = json.dumps({"id": "chatcmpl-echo", "object": "chat.completion", "choices": [choice]}).encode()
        echoed = [v.encode() for v in (request.headers.get("Authorization", ""), unquote(request.query.get("key", "")))]
        cuts = sorted(text.find(v) + len(v) // 2 for v in echoed if len(v) > 1 and v in text)
        last = 0
        for cut in [*cuts, len(text)]:
            await response.write(text[last:cut])
            await asyncio.sleep(0.02)  # a read boundary inside the key
            last = cut
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    print(f"listening on http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


# -- processes ------------------------------------------------------------------------------------------------------


@dataclass
class Proc:
    proc: subprocess.Popen[str]
    url: str
    lines: list[str]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> str:
        """SIGINT, wait, and everything it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=60)
        return "".join(self.lines) + out + self.log.read_text(errors="replace")


def start(args: list[str], env: dict[str, str], log: Path) -> Proc:
    # stderr to a file: a pipe nobody reads while the process runs would block it once full.
    with log.open("w") as err:
        proc = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, env=env, start_new_session=True
        )
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 60
    url = None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if m := re.search(r"listening on (http://[\d.:]+)", line):
            url = m.group(1)
        if url and (args[2:4] != ["bench", "proxy"] or "writing" in line or "passthrough" in line):
            return Proc(proc, url, lines, log)
    proc.kill()
    raise SystemExit(f"could not start {' '.join(args)}: {''.join(lines)}{log.read_text(errors='replace')}")


def bench_proxy(upstream: str, cassettes: Path, *extra: str, env: dict[str, str]) -> Proc:
    args = [sys.executable, "-m", "bench", "proxy", "--port", "0", "--upstream", upstream]
    return start([*args, "--cassettes", str(cassettes), *extra], env, cassettes.with_suffix(".log"))


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (min(needed, hard) if hard != resource.RLIM_INFINITY else needed, hard)
        )


# -- 1. load --------------------------------------------------------------------------------------------------------


async def load(url: str, streams: int, tokens: int) -> tuple[int, int, dict[str, int]]:
    """(held, errors, why) for `streams` concurrent paced streams."""
    import aiohttp

    expected = b"".join([*(sse(f" w{i}") for i in range(tokens)), sse("", "stop"), b"data: [DONE]\n\n"])
    why: dict[str, int] = {}

    async def one(session: aiohttp.ClientSession, i: int) -> bool:
        body = {"model": "mock", "stream": True, "messages": [{"role": "user", "content": f"story {i}"}]}
        body |= {"x_tokens": tokens, "x_ttft_ms": 500, "x_itl_ms": 50}
        try:
            async with session.post(url + "/v1/chat/completions", json=body) as resp:
                data = await resp.read()
        except Exception as exc:  # any failure of one stream is a figure, not a crash of the suite
            why[type(exc).__name__] = why.get(type(exc).__name__, 0) + 1
            return False
        if data != expected:
            why["bytes differ"] = why.get("bytes differ", 0) + 1
            return False
        return True

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        results = await asyncio.gather(*(one(session, i) for i in range(streams)))
    held = sum(results)
    return held, streams - held, why


# -- 2. slow clients ------------------------------------------------------------------------------------------------


async def slow_clients(url: str, connections: int, pid: int) -> tuple[int, int, int]:
    """(opened, the proxy's open fds once they are, how many it still holds once its header timeout has long
    passed)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(connections):
        opened.append(await asyncio.open_connection(host, int(port)))
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n\r\n"

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for byte in head:
            if writer.is_closing() or reader.at_eof():
                return
            writer.write(bytes([byte]))
            await asyncio.sleep(1.0)

    async def closed(reader: asyncio.StreamReader, within: float) -> bool:
        try:
            async with asyncio.timeout(within):
                while await reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    tricklers = [asyncio.create_task(trickle(r, w)) for r, w in opened[::2]]  # half trickle, half stay silent
    fds_held = open_fds(pid)
    # The bound: the header timeout plus ample slack for a loaded machine; a connection open after that is held.
    verdicts = await asyncio.gather(*(closed(r, HEADER_TIMEOUT + 20) for r, _ in opened))
    for task in tricklers:
        task.cancel()
    for _, writer in opened:
        writer.close()
    return len(opened), fds_held, sum(not v for v in verdicts)


# -- 3. secrets -----------------------------------------------------------------------------------------------------


async def hostile_requests(url: str, client_key: str) -> None:
    import aiohttp

    query = f"?key={QUERY_KEY[0]}%2F{QUERY_KEY[1]}"
    headers = {"Authorization": f"Bearer {client_key}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        for stream in (True, False):
            body = {"model": "mock", "stream": stream, "x_echo": True, "messages": [{"role": "user", "content": "hi"}]}
            async with session.post(url + "/v1/chat/completions" + query, json=body) as resp:
                await resp.read()


def cli(*argv: str) -> tuple[int | None, str, str, str | None]:
    """Run the public CLI in-process: (exit code, stdout, stderr, traceback if one escaped)."""
    from bench.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    crash = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            crash = traceback.format_exc()
    return code, out.getvalue(), err.getvalue(), crash


def artifacts(cassette_dir: Path, proxy_output: str, work: Path) -> dict[str, str]:
    """Every artifact a user can get from a recording, as text (bytes decoded as latin-1)."""
    import zstandard

    found: dict[str, str] = {"proxy output": proxy_output}
    for path in sorted(cassette_dir.glob("*.cassette")):
        with path.open("rb") as f:
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(f.read())
        found[f"{path.name} decompressed"] = raw.decode("latin-1")
        _, listing, _, _ = cli("cassette", "ls", str(path))
        found[f"{path.name} ls"] = listing
        shows = []
        for n in range(1, 20):
            code, shown, err, _ = cli("cassette", "show", str(path), "--id", f"x{n}")
            if code:
                break
            shows.append(shown + err)
        found[f"{path.name} show x1..x{len(shows)}"] = "".join(shows)
        for fmt in ("jsonl", "har"):
            out = work / f"{path.stem}.{fmt}"
            cli("cassette", "export", str(path), "--format", fmt, "-o", str(out))
            found[f"{path.name} export {fmt}"] = out.read_text(errors="replace") if out.exists() else ""
    return found


def leaks(text: str) -> int:
    """Occurrences of any 8-hex-digit block of any key (a key cut in two reads is stored in two pieces)."""
    randoms = [UPSTREAM_KEY[-32:], CLIENT_KEY[-32:], "".join(QUERY_KEY)]
    return sum(text.count(r[i : i + 8]) for r in randoms for i in range(0, 32, 8))


# -- 4. damaged files -----------------------------------------------------------------------------------------------


@dataclass
class Damage:
    tried: int = 0
    tracebacks: int = 0
    silent: int = 0
    reported: int = 0  # said something on stderr or exited non-zero
    ls_tracebacks: int = 0
    unchanged: int = 0  # output identical to the intact file's


def damaged_files(work: Path, flips: int, cuts: int, rng: random.Random) -> Damage:
    intact = SHIPPED.read_bytes()
    reference = read_export(SHIPPED, work)[1]
    variants: list[bytes] = []
    for _ in range(flips):
        at = rng.randrange(len(intact))
        variants.append(intact[:at] + bytes([intact[at] ^ (1 << rng.randrange(8))]) + intact[at + 1 :])
    for _ in range(cuts):
        variants.append(intact[: rng.randrange(1, len(intact))])
    damage = Damage()
    for i, data in enumerate(variants):
        path = work / f"damaged-{i:03d}.cassette"
        path.write_bytes(data)
        damage.tried += 1
        code, out, err, crash = read_export(path, work)
        if crash is not None or "Traceback" in err:
            damage.tracebacks += 1
        elif code or err.strip():
            damage.reported += 1
        elif out == reference:
            damage.unchanged += 1
        else:
            damage.silent += 1
        _, _, err, crash = cli("cassette", "ls", str(path))
        damage.ls_tracebacks += crash is not None or "Traceback" in err
        path.unlink()
    return damage


def read_export(path: Path, work: Path) -> tuple[int | None, str, str, str | None]:
    target = work / "export.jsonl"
    target.unlink(missing_ok=True)
    code, _, err, crash = cli("cassette", "export", str(path), "--format", "jsonl", "-o", str(target))
    return code, target.read_text(errors="replace") if target.exists() else "", err, crash


# -- the run --------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer streams, connections and damaged files")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        asyncio.run(serve_upstream())
        return 0
    streams, connections, flips, cuts = (200, 200, 10, 5) if args.quick else (1000, 1000, 40, 20)
    raise_fd_limit(4 * max(streams, connections) + 512)  # children inherit it: the proxy holds two per stream
    sys.path.insert(0, str(ROOT))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_FAULTS_KEY": UPSTREAM_KEY}
    started = time.monotonic()
    procs: list[Proc] = []
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        work = Path(tmp)
        try:
            upstream = start([sys.executable, str(Path(__file__).resolve()), "--serve-upstream"], env, work / "up.log")
            procs.append(upstream)
            timeouts = ("--header-timeout", f"{HEADER_TIMEOUT:g}", "--keepalive-timeout", f"{HEADER_TIMEOUT:g}")
            proxy = bench_proxy(upstream.url, work / "load", *timeouts, env=env)
            procs.append(proxy)

            print(f"1. {streams} concurrent paced streams (40 tokens, 50 ms apart) ...", file=sys.stderr)
            held, errors, why = asyncio.run(load(proxy.url, streams, 40))
            rss = peak_rss_mb(proxy.pid)
            print(f"2. {connections} slow connections against --header-timeout {HEADER_TIMEOUT:g} ...", file=sys.stderr)
            fds_before = open_fds(proxy.pid)
            opened, fds_held, still_held = asyncio.run(slow_clients(proxy.url, connections, proxy.pid))
            time.sleep(0.5)
            fds_after = open_fds(proxy.pid)
            stop_line = proxy.stop().strip().splitlines()[-1]
            procs.remove(proxy)

            print("3. hostile upstream echoing keys split across reads ...", file=sys.stderr)
            found: dict[str, int] = {}
            for name, extra in (("with --upstream-key-env", ("--upstream-key-env", "BENCH_FAULTS_KEY")), ("plain", ())):
                folder = work / f"secrets-{name.split()[-1]}"
                hostile = bench_proxy(upstream.url, folder, *extra, env=env)
                procs.append(hostile)
                asyncio.run(hostile_requests(hostile.url, CLIENT_KEY))
                output = hostile.stop()
                procs.remove(hostile)
                for artifact, text in artifacts(folder, output, work).items():
                    found[f"{name}: {artifact}"] = leaks(text)

            print("4. damaged cassettes ...", file=sys.stderr)
            damage = damaged_files(work, flips, cuts, random.Random(10))
        finally:
            for p in procs:
                if p.proc.poll() is None:
                    p.proc.kill()
                    p.proc.wait()

    print()
    print(f"load: {held} of {streams} concurrent paced streams held whole, {errors} errors{why or ''}; ", end="")
    print(f"proxy peak RSS {rss:.0f} MB")
    print(f"      proxy's stop line: {stop_line}")
    print(f"slow clients: {opened} connections (half silent, half trickling 1 byte/s); ", end="")
    print(f"still held after --header-timeout {HEADER_TIMEOUT:g} s: {still_held} (goal 0); ", end="")
    print(f"proxy's open fds {fds_before} before, {fds_held} with them open, {fds_after} after")
    total = sum(found.values())
    print(f"secrets: {total} key fragments found in {len(found)} artifacts (goal 0)")
    for artifact, count in found.items():
        if count:
            print(f"      {count:>3} in {artifact}")
    print(
        f"damaged files: {flips} flipped-byte and {cuts} cut copies of {SHIPPED.name}; export: {damage.tracebacks} "
        f"tracebacks (goal 0), {damage.silent} silent differences (goal 0), {damage.reported} reported, "
        f"{damage.unchanged} unchanged; ls: {damage.ls_tracebacks} tracebacks (goal 0)"
    )
    elapsed = time.monotonic() - started
    print(f"measured in {elapsed:.0f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
