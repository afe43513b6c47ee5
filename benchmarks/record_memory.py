"""Peak memory of `bench proxy --mode record` (and `--mode replay`) for large non-streamed answers (issue 10: "memory
per response").

A mock upstream (in this process, on 127.0.0.1) answers every chat request with one JSON body of `--mb` MB; a real
`bench proxy` process records it. Printed: the proxy's peak RSS (VmHWM) when idle, after one such answer, and after
`--parallel` at once (a fresh proxy each), with every answer checked byte for byte against the upstream's (sha256).
`--gzip`: the upstream sends the body gzip-encoded (`Content-Encoding: gzip`; the answers are checked as the wire
bytes). `--replay`: the answers are recorded once (by this checkout), then a replaying proxy (`--pace instant`, its
replay log on) serves them: printed is its peak RSS once started (the index loaded) and after the answers.

The proxy is started from the checkout this file is in (not from whatever `bench` is installed). With `--baseline
REF` the same runs are made, interleaved, with a proxy started from `git archive REF` of this repository, and the two
are printed side by side. Also printed: how long the proxy took to stop (closing and recompressing the cassette).

    .venv/bin/python benchmarks/record_memory.py [--mb 50] [--parallel 8] [--baseline main] [--hex] [--gzip] [--replay]
        [--bomb MIB] [--key]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
# Import the checkout's packages, not an installed (editable) copy of another checkout.
BOOT = (
    "import sys, runpy; root = sys.argv.pop(1); "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
    "sys.path.insert(0, root); sys.argv[0] = 'bench'; runpy.run_module('bench', run_name='__main__')"
)


def big_body(mb: int, hexed: bool = False) -> bytes:
    rng = random.Random(mb)
    if hexed:  # incompressible text: what recompression at close costs most on
        text = rng.randbytes(mb * (1 << 19)).hex().encode()
        head = b'{"id":"chatcmpl-big","object":"chat.completion","model":"big-model","choices":[{"index":0,'
        return head + b'"message":{"role":"assistant","content":"' + text + b'"}}],"system_fingerprint":"fp_big"}'
    words = b"the quick brown fox jumps over a lazy dog while seven wise owls count".split(b" ")
    text = b" ".join(rng.choice(words) for _ in range(mb * (1 << 20) // 5))[: mb * (1 << 20)]
    head = b'{"id":"chatcmpl-big","object":"chat.completion","model":"big-model","choices":[{"index":0,'
    return head + b'"message":{"role":"assistant","content":"' + text + b'"}}],"system_fingerprint":"fp_big"}'


async def upstream(body: bytes, gzipped: bool = False) -> tuple[web.AppRunner, str]:
    headers = {"Content-Encoding": "gzip"} if gzipped else {}

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json", headers=headers)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    sys.path.insert(0, str(ROOT))
    from tests.support.serve import serve_on_loopback

    return await serve_on_loopback(app)


def start_proxy(url: str | None, cassettes: Path, root: Path) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-c", BOOT, str(root), "proxy", "--port", "0"]
    args += ["--upstream", url] if url is not None else ["--mode", "replay", "--pace", "instant"]
    proc = subprocess.Popen(
        [*args, "--cassettes", str(cassettes)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        text = "".join(seen)
        if (m := re.search(r"listening on (http://[\d.:]+)", text)) and "writing" in text:
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("could not start bench proxy: " + "".join(seen))


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# `--key`: the client sends a key, as real clients do; the proxy then searches every body for it (a compressed body
# decoded), which is what a compressed answer costs most in.
HEADERS: dict[str, str] = {}


async def ask(session: aiohttp.ClientSession, url: str, i: int) -> str:
    request = {"model": "big-model", "n": i}
    async with session.post(f"{url}/v1/chat/completions", json=request, headers=HEADERS) as resp:
        assert resp.status == 200, resp.status
        digest = hashlib.sha256()
        async for piece in resp.content.iter_any():  # the wire bytes (a gzip body is not decoded here)
            digest.update(piece)
        return digest.hexdigest()


async def one(url: str, root: Path, n: int, want: str) -> tuple[float, float, float, bool]:
    """(idle MiB, peak MiB, seconds to stop, recording byte-identical) for n answers at once through one proxy."""
    with tempfile.TemporaryDirectory() as tmp:
        return await _served(url, Path(tmp), root, n, want, "rec-*.cassette")


async def replay(recorded: Path, root: Path, n: int, want: str) -> tuple[float, float, float, bool]:
    """(MiB once started, peak MiB, seconds to stop, replay log byte-identical) for n answers at once replayed from
    the cassettes in `recorded` (copied: the replay log is written beside them)."""
    with tempfile.TemporaryDirectory() as tmp:
        for path in recorded.glob("*.cassette"):
            shutil.copy(path, tmp)
        return await _served(None, Path(tmp), root, n, want, "replay-*.cassette")


async def _served(
    url: str | None, folder: Path, root: Path, n: int, want: str, written: str
) -> tuple[float, float, float, bool]:
    """n answers at once through a proxy on `folder` (recording from `url`, or replaying with None): its MiB once
    started, its peak, seconds to stop, and whether the cassette it wrote (`written`) holds them byte for byte."""
    proc, proxy = start_proxy(url, folder, root)
    started = peak_mib(proc.pid)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
        got = await asyncio.gather(*(ask(session, proxy, i) for i in range(n)))
    assert got == [want] * n, "an answer came back changed"
    await in_file(folder, written, n)
    peak = peak_mib(proc.pid)
    t = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=600)
    stop = time.monotonic() - t
    return started, peak, stop, recorded_ok(next(folder.glob(written)), want, n)


async def in_file(folder: Path, pattern: str, n: int) -> None:
    """Wait until the proxy's cassette holds n exchanges: a client reads a body with a Content-Length whole before
    the proxy has built its record (the response's end waits for the record, the body does not), and building it
    (decoding a compressed body, redaction) is part of the peak."""
    sys.path.insert(0, str(ROOT))
    from bench.core.cassette import CassetteReader
    from bench.core.errors import CassetteError

    for _ in range(3000):
        for path in folder.glob(pattern):
            try:
                if sum(1 for _ in CassetteReader(path, part_bodies=False)) >= n:
                    return
            except CassetteError:
                pass
        await asyncio.sleep(0.2)
    raise SystemExit(f"the proxy did not record {n} exchange(s) in 10 minutes")


def recorded_ok(path: Path, want: str, n: int) -> bool:
    sys.path.insert(0, str(ROOT))
    from bench.core.cassette import read_cassette

    _, records = read_cassette(path)
    return len(records) == n and all(hashlib.sha256(b"".join(r.response.chunks)).hexdigest() == want for r in records)


async def run(
    mb: int, parallel: int, baseline: str | None, hexed: bool, gzipped: bool, replaying: bool, bomb: int
) -> None:
    body = big_body(mb, hexed) if not bomb else b""
    if bomb:  # a hostile upstream: a few hundred KiB of gzip that decode to `bomb` MiB of zeros
        gzipped = True
        body = gzip.compress(b"\0" * (bomb << 20), compresslevel=9)
        print(f"the upstream sends a gzip bomb: {len(body) / 2**10:.0f} KiB decoding to {bomb} MiB", flush=True)
    elif gzipped:
        body = gzip.compress(body, compresslevel=6)
        print(f"the upstream sends {len(body) / 2**20:.1f} MiB of gzip ({mb} MB decoded)", flush=True)
    want = hashlib.sha256(body).hexdigest()
    what = f"{bomb} MiB gzip bomb(s)" if bomb else f"{mb} MB{' gzip' if gzipped else ''} answer(s)"
    if replaying:
        await run_replay(body, gzipped, want, mb, parallel, baseline)
        return
    runner, url = await upstream(body, gzipped)
    with tempfile.TemporaryDirectory() as old:
        roots = checkouts(baseline, old)
        try:
            for n in (1, parallel):
                for name, root in roots:  # interleaved: both under the same load
                    idle, peak, stop, ok = await one(url, root, n, want)
                    print(
                        f"{n} x {what}, {name:>13}: peak RSS {peak:.0f} MiB (idle {idle:.0f} MiB, "
                        f"+{peak - idle:.0f} MiB); stop (close) {stop:.1f} s; answers byte-identical; "
                        f"recording {'byte-identical' if ok else 'DIFFERS'}",
                        flush=True,
                    )
        finally:
            await runner.cleanup()


def checkouts(baseline: str | None, old: str) -> list[tuple[str, Path]]:
    roots = [("this checkout", ROOT)]
    if baseline is not None:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", baseline], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", old], input=archive.stdout, check=True)
        roots.append((baseline, Path(old)))
    return roots


async def run_replay(body: bytes, gzipped: bool, want: str, mb: int, parallel: int, baseline: str | None) -> None:
    """Record each answer count once with this checkout, then replay it with each checkout, interleaved."""
    runner, url = await upstream(body, gzipped)
    with tempfile.TemporaryDirectory() as old, tempfile.TemporaryDirectory() as rec:
        roots = checkouts(baseline, old)
        try:
            for n in (1, parallel):
                folder = Path(rec) / str(n)
                folder.mkdir()
                proc, proxy = start_proxy(url, folder, ROOT)
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
                    assert await asyncio.gather(*(ask(session, proxy, i) for i in range(n))) == [want] * n
                proc.send_signal(signal.SIGINT)
                proc.communicate(timeout=600)
                for name, root in roots:
                    started, peak, stop, ok = await replay(folder, root, n, want)
                    print(
                        f"replay {n} x {mb} MB answer(s), {name:>13}: peak RSS {peak:.0f} MiB (once started "
                        f"{started:.0f} MiB, +{peak - started:.0f} MiB serving); stop (close) {stop:.1f} s; answers "
                        f"byte-identical; replay log {'byte-identical' if ok else 'DIFFERS'}",
                        flush=True,
                    )
        finally:
            await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--baseline", metavar="REF", help="also run `git archive REF` of this repository, interleaved")
    parser.add_argument("--hex", action="store_true", help="answers of random hex (incompressible text)")
    parser.add_argument("--gzip", action="store_true", help="the upstream sends its answers gzip-encoded")
    parser.add_argument("--replay", action="store_true", help="measure a replaying proxy serving the answers")
    parser.add_argument("--bomb", type=int, default=0, metavar="MIB", help="answers: gzip of MIB MiB of zeros")
    parser.add_argument("--key", action="store_true", help="the client sends a key (the proxy searches for it)")
    args = parser.parse_args()
    if args.key:
        HEADERS["Authorization"] = "Bearer sk-bench-memory-0123456789abcdef"
    print(f"checkout: {ROOT}; load {os.getloadavg()[0]:.1f}")
    asyncio.run(run(args.mb, args.parallel, args.baseline, args.hex, args.gzip, args.replay, args.bomb))


if __name__ == "__main__":
    main()
