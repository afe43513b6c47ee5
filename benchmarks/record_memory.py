"""Peak memory of `bench proxy --mode record` for large non-streamed answers (issue 10: "memory per response").

A mock upstream (in this process, on 127.0.0.1) answers every chat request with one JSON body of `--mb` MB; a real
`bench proxy` process records it. Printed: the proxy's peak RSS (VmHWM) when idle, after one such answer, and after
`--parallel` at once (a fresh proxy each), with every answer checked byte for byte against the upstream's (sha256).

The proxy is started from the checkout this file is in (not from whatever `bench` is installed). With `--baseline
REF` the same runs are made, interleaved, with a proxy started from `git archive REF` of this repository, and the two
are printed side by side. Also printed: how long the proxy took to stop (closing and recompressing the cassette).

    .venv/bin/python benchmarks/record_memory.py [--mb 50] [--parallel 8] [--baseline main] [--hex]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import re
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


async def upstream(body: bytes) -> tuple[web.AppRunner, str]:
    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    sys.path.insert(0, str(ROOT))
    from tests.support.serve import serve_on_loopback

    return await serve_on_loopback(app)


def start_proxy(url: str, cassettes: Path, root: Path) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-c", BOOT, str(root), "proxy", "--port", "0", "--upstream", url]
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


async def ask(session: aiohttp.ClientSession, url: str, i: int) -> str:
    async with session.post(f"{url}/v1/chat/completions", json={"model": "big-model", "n": i}) as resp:
        assert resp.status == 200, resp.status
        return hashlib.sha256(await resp.read()).hexdigest()


async def one(url: str, root: Path, n: int, want: str) -> tuple[float, float, float, bool]:
    """(idle MiB, peak MiB, seconds to stop, recording byte-identical) for n answers at once through one proxy."""
    with tempfile.TemporaryDirectory() as tmp:
        proc, proxy = start_proxy(url, Path(tmp), root)
        idle = peak_mib(proc.pid)
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            got = await asyncio.gather(*(ask(session, proxy, i) for i in range(n)))
        assert got == [want] * n, "an answer came back changed"
        # The last record is written before its response ends (kill -9 safety): the peak is in already.
        peak = peak_mib(proc.pid)
        t = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=600)
        stop = time.monotonic() - t
        recorded = recorded_ok(next(Path(tmp).glob("*.cassette")), want, n)
        return idle, peak, stop, recorded


def recorded_ok(path: Path, want: str, n: int) -> bool:
    sys.path.insert(0, str(ROOT))
    from bench.cassette import read_cassette

    _, records = read_cassette(path)
    return len(records) == n and all(hashlib.sha256(b"".join(r.response.chunks)).hexdigest() == want for r in records)


async def run(mb: int, parallel: int, baseline: str | None, hexed: bool) -> None:
    body = big_body(mb, hexed)
    want = hashlib.sha256(body).hexdigest()
    runner, url = await upstream(body)
    with tempfile.TemporaryDirectory() as old:
        roots = [("this checkout", ROOT)]
        if baseline is not None:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", baseline], check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", old], input=archive.stdout, check=True)
            roots.append((baseline, Path(old)))
        try:
            for n in (1, parallel):
                for name, root in roots:  # interleaved: both under the same load
                    idle, peak, stop, ok = await one(url, root, n, want)
                    print(
                        f"{n} x {mb} MB answer(s), {name:>13}: peak RSS {peak:.0f} MiB (idle {idle:.0f} MiB, "
                        f"+{peak - idle:.0f} MiB); stop (close) {stop:.1f} s; answers byte-identical; "
                        f"recording {'byte-identical' if ok else 'DIFFERS'}",
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
    args = parser.parse_args()
    print(f"checkout: {ROOT}; load {os.getloadavg()[0]:.1f}")
    asyncio.run(run(args.mb, args.parallel, args.baseline, args.hex))


if __name__ == "__main__":
    main()
