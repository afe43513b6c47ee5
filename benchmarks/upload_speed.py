"""Upload time per GiB of `bench.core.storage.upload` (put, size check, read back for the sha256, remove the local copy)
to moto's S3 server on 127.0.0.1: loopback, no network, so this is bench's and the client's own cost (and moto's),
a floor under what a real service costs. The file is random bytes, as incompressible as a compressed cassette.

    .venv/bin/python benchmarks/upload_speed.py [--mib 128] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core import storage  # noqa: E402
from tests.support.s3 import start_moto  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import fsspec.config

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server, endpoint = start_moto()
    try:
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
        fsspec.config.conf["s3"] = {"endpoint_url": endpoint}
        fsspec.filesystem("s3").mkdir("bench-upload")
        best = float("inf")
        with tempfile.TemporaryDirectory(prefix="bench-upload-") as tmp:
            block = os.urandom(1 << 20)
            for r in range(args.rounds):
                path = Path(tmp) / f"big-{r}.cassette"
                with open(path, "wb") as fh:
                    for i in range(args.mib):
                        fh.write(block[i % 7 :] + block[: i % 7])  # no two MiB alike
                t = time.perf_counter()
                storage.upload(path, "s3://bench-upload/runs")
                best = min(best, time.perf_counter() - t)
                assert not path.exists()
    finally:
        server.stop()
    gib = args.mib / 1024
    print(
        f"upload of {args.mib} MiB to moto on 127.0.0.1 (put + size + sha256 read-back), best of {args.rounds}: "
        f"{best:.1f} s = {best / gib:.0f} s per GiB ({args.mib / best:.0f} MiB/s; "
        f"load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
