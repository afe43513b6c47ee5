"""Rescore throughput beyond the process pool: Dask LocalClusters and cassettes on S3, side by side in one run.

Builds a folder of `--copies` copies of the shipped SmolLM2 recording (180 real exchanges each, scored with the
built-in catalog), then, in interleaved rounds, times `bench.scorer.rescore.rescore` over it: in-process (1 job), the
process pool (2 jobs), a LocalCluster of 1 and of 2 worker processes (started once, before the rounds: what is
timed is a run on a warm cluster), and in-process again from `s3://` on moto's S3 server on 127.0.0.1. Prints the
median exchanges/s of each, the scaling efficiency of 2 workers over 1, S3 over local disk, and the upload time
per GB (storage.upload: put, then read back for the sha256). The machine's cores bound what 2 workers can show.

    .venv/bin/python benchmarks/scale.py [--copies 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core import storage  # noqa: E402
from bench.core.cassette import CassetteReader  # noqa: E402
from bench.core.cassette.reader import find_locations  # noqa: E402
from bench.scorer import distributed as dist  # noqa: E402
from bench.scorer import units  # noqa: E402
from bench.scorer.checked_catalog import load_catalog  # noqa: E402
from bench.scorer.unit_scoring import Options  # noqa: E402
from bench.scorer.units import plan_units  # noqa: E402
from tests.support.rescored import rescored as rescore  # noqa: E402
from tests.support.s3 import start_moto  # noqa: E402

SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"
EXCHANGES_EACH = 180


def without_prefetch(fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        depth, units.PREFETCH = units.PREFETCH, 0
        try:
            return fn()
        finally:
            units.PREFETCH = depth

    return run


def time_rounds(configs: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Each config's wall time (s) per round, the configs run one after another within each round: side by side."""
    times: dict[str, list[float]] = {k: [] for k in configs}
    for _ in range(rounds):
        for name, fn in configs.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return times


def read_all(paths: list[storage.Location]) -> int:
    """Every record of these cassettes, in order, with the prefetch an in-process rescore uses."""
    n = 0
    urls = [str(p) for p in paths if storage.is_url(p)]
    with storage.prefetching(units.PREFETCH if urls else 0) as ahead:
        for i, path in enumerate(paths):
            if ahead is not None:
                ahead.want(urls[i : i + 1 + units.PREFETCH])
            n += sum(1 for _ in CassetteReader(path))
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import fsspec.config

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    catalog = load_catalog(None)
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    folder = tmp / "runs"
    folder.mkdir()
    for i in range(args.copies):
        shutil.copy(SHIPPED, folder / f"c{i:03d}.cassette")
    exchanges = EXCHANGES_EACH * args.copies

    server, endpoint = start_moto()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    fsspec.config.conf["s3"] = {"endpoint_url": endpoint}
    fs = fsspec.filesystem("s3")
    fs.mkdir("bench-scale")
    spool = tmp / "spool"
    spool.mkdir()
    upload_s = 0.0
    uploaded = 0
    for path in sorted(folder.glob("*.cassette")):
        copy = spool / path.name
        shutil.copy(path, copy)
        uploaded += copy.stat().st_size
        t = time.perf_counter()
        storage.upload(copy, "s3://bench-scale/runs")
        upload_s += time.perf_counter() - t

    clusters = contextlib.ExitStack()
    # The same clusters `--dask local:N` starts (loopback only, no dashboard port).
    clients = {n: clusters.enter_context(dist.local_client(n)) for n in (1, 2)}

    def on_dask(n: int) -> Callable[[], object]:
        client = clients[n]

        def run() -> object:
            files = sorted(folder.glob("*.cassette"))
            planned = dist.resolve_local(plan_units(files, dist.workers_of(client)))
            return dist.run_units(client, planned, catalog, Options(base=folder.resolve()))

        return run

    configs: dict[str, Callable[[], object]] = {
        "in-process, 1 job": lambda: rescore([folder], catalog=catalog, jobs=1),
        "process pool, 2 jobs": lambda: rescore([folder], catalog=catalog, jobs=2),
        "LocalCluster, 1 worker": on_dask(1),
        "LocalCluster, 2 workers": on_dask(2),
        "s3:// (moto), 1 job": lambda: rescore(["s3://bench-scale/runs"], catalog=catalog, jobs=1),
        "s3://, 1 job, no prefetch": without_prefetch(
            lambda: rescore(["s3://bench-scale/runs"], catalog=catalog, jobs=1)
        ),
        # Reading alone (every record decoded, nothing scored): what the prefetch can hide is the fetch's wait.
        "read only, local disk": lambda: read_all(list(folder.glob("*.cassette"))),
        "read only, s3://": lambda: read_all(find_locations(["s3://bench-scale/runs"])),
        "read only, s3://, no prefetch": without_prefetch(lambda: read_all(find_locations(["s3://bench-scale/runs"]))),
    }
    try:
        times = time_rounds(configs, args.rounds)
    finally:
        clusters.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    rate = {k: exchanges / statistics.median(v) for k, v in times.items()}
    print(f"{exchanges} exchanges ({args.copies} cassettes), median of {args.rounds} interleaved rounds, "
          f"{os.cpu_count()} cores (shared)")  # fmt: skip
    for name, r in rate.items():
        print(f"  {name:30s} {r:8.0f} exchanges/s   ({r / rate['in-process, 1 job']:.2f}x in-process)")
    eff = rate["LocalCluster, 2 workers"] / (2 * rate["LocalCluster, 1 worker"])
    print(f"  scaling efficiency, 2 workers over 1: {eff:.0%}")
    print(f"  s3:// over local disk (1 job): {rate['s3:// (moto), 1 job'] / rate['in-process, 1 job']:.2f}x")
    print(
        f"  prefetch ({units.PREFETCH} ahead) over none, s3:// rescore: "
        f"{rate['s3:// (moto), 1 job'] / rate['s3://, 1 job, no prefetch']:.2f}x; read only: "
        f"{rate['read only, s3://'] / rate['read only, s3://, no prefetch']:.2f}x "
        f"(s3:// over local disk, read only: {rate['read only, s3://'] / rate['read only, local disk']:.2f}x, "
        f"{rate['read only, s3://, no prefetch'] / rate['read only, local disk']:.2f}x without prefetch)"
    )
    print(f"  upload (put + sha256 read-back) to moto: {upload_s / (uploaded / 2**30):.1f} s per GiB "
          f"({uploaded / 2**20:.1f} MiB in {args.copies} files)")  # fmt: skip


if __name__ == "__main__":
    main()
