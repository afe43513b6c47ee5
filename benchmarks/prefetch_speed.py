"""Reading cassettes from S3 with and without the prefetch, behind a round trip like a real service's.

moto's S3 server on 127.0.0.1 answers in about a millisecond, which hides what the prefetch is for: the wait for each
object. Here the client reaches moto through a relay that holds every piece of a request for `--rtt-ms` before
passing it on (a stand-in for the network's round trip: the delay is the point of the measure). `--copies` copies of
the shipped recording are read record by record (no scoring) the way an in-process rescore reads them, with
`units.PREFETCH` ahead and with none, and straight from local disk, in interleaved rounds; medians.

    .venv/bin/python benchmarks/prefetch_speed.py [--copies 12] [--rtt-ms 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.cassette.reader import find_locations  # noqa: E402
from bench.scorer import units  # noqa: E402
from benchmarks.scale import read_all, time_rounds, without_prefetch  # noqa: E402
from tests.support.s3 import start_moto  # noqa: E402

SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def relay(target: tuple[str, int], delay_s: float) -> tuple[socket.socket, int]:
    """A TCP relay on 127.0.0.1 that delays what the client sends by `delay_s` (answers pass straight back)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def pump(src: socket.socket, dst: socket.socket, wait: float) -> None:
        try:
            while data := src.recv(1 << 16):
                if wait:
                    time.sleep(wait)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(target)
            threading.Thread(target=pump, args=(client, server, delay_s), daemon=True).start()
            threading.Thread(target=pump, args=(server, client, 0.0), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=12)
    ap.add_argument("--rtt-ms", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import fsspec.config

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    tmp = Path(tempfile.mkdtemp(prefix="bench-prefetch-"))
    folder = tmp / "runs"
    folder.mkdir()
    for i in range(args.copies):
        shutil.copy(SHIPPED, folder / f"c{i:03d}.cassette")
    server, endpoint = start_moto()
    host, port = endpoint.rsplit("/", 1)[-1].split(":")
    listener, relay_port = relay((host, int(port)), args.rtt_ms / 1000)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    fsspec.config.conf["s3"] = {"endpoint_url": f"http://127.0.0.1:{relay_port}"}
    fs = fsspec.filesystem("s3")
    fs.mkdir("bench-prefetch")
    for path in sorted(folder.glob("*.cassette")):
        fs.put_file(str(path), f"bench-prefetch/runs/{path.name}")
    urls = find_locations(["s3://bench-prefetch/runs"])
    local = sorted(folder.glob("*.cassette"))
    configs = {
        "local disk": lambda: read_all(list(local)),
        f"s3://, prefetch {units.PREFETCH} ahead": lambda: read_all(urls),
        "s3://, one at a time": without_prefetch(lambda: read_all(urls)),
    }
    try:
        times = time_rounds(configs, args.rounds)
    finally:
        listener.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.copies} cassettes of 180 exchanges, {args.rtt_ms:g} ms added per request, median of {args.rounds}")
    base = statistics.median(times["s3://, one at a time"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"  {name:28s} {m:6.2f} s  {args.copies / m:6.1f} cassettes/s  ({base / m:.2f}x one at a time)")


if __name__ == "__main__":
    main()
