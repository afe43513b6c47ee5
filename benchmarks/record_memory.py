"""Peak memory of `bench proxy --mode record` for large non-streamed answers (issue 10: "memory per response").

A mock upstream (in this process, on 127.0.0.1) answers every chat request with one JSON body of `--mb` MB; a real
`bench proxy` process records it. Printed: the proxy's peak RSS (VmHWM) when idle, after one such answer, and after
`--parallel` at once (a fresh proxy each), with every answer checked byte for byte against the upstream's (sha256).

The proxy is started from the checkout this file is in (not from whatever `bench` is installed), so running this file
of another checkout measures that checkout: before/after figures come from running it in both, one after the other.

    .venv/bin/python benchmarks/record_memory.py [--mb 50] [--parallel 8]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
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


def big_body(mb: int) -> bytes:
    rng = random.Random(mb)
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
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def start_proxy(url: str, cassettes: Path) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-c", BOOT, str(ROOT), "proxy", "--port", "0", "--upstream", url]
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


async def run(mb: int, parallel: int) -> None:
    body = big_body(mb)
    want = hashlib.sha256(body).hexdigest()
    runner, url = await upstream(body)
    try:
        for n in (1, parallel):
            with tempfile.TemporaryDirectory() as tmp:
                proc, proxy = start_proxy(url, Path(tmp))
                idle = peak_mib(proc.pid)
                timeout = aiohttp.ClientTimeout(total=600)
                async with aiohttp.ClientSession(timeout=timeout) as session:
                    got = await asyncio.gather(*(ask(session, proxy, i) for i in range(n)))
                assert got == [want] * n, "an answer came back changed"
                # The last record is written before its response ends (kill -9 safety): the peak is in already.
                peak = peak_mib(proc.pid)
                proc.send_signal(signal.SIGINT)
                proc.communicate(timeout=300)
                print(
                    f"{n} x {mb} MB answer(s): bench proxy peak RSS {peak:.0f} MiB "
                    f"(idle {idle:.0f} MiB, +{peak - idle:.0f} MiB); answers byte-identical"
                )
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    print(f"checkout: {ROOT}")
    asyncio.run(run(args.mb, args.parallel))


if __name__ == "__main__":
    main()
