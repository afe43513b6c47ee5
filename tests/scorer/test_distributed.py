"""`rescore --dask` on a real Dask LocalCluster with separate worker processes: byte-identical scores to a local
run, a worker killed mid-unit retried, a unit that fails twice named, and the one-line errors."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.catalog.model import Catalog
from bench.core.cassette import read_cassette
from bench.core.cassette.writer import CassetteWriter
from bench.core.errors import BenchError
from bench.scorer import distributed as dist
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.scores_io import write_scores
from bench.scorer.unit_scoring import Options, UnitOutput
from bench.scorer.units import SHARD_MIN_BYTES, plan_units
from tests.support.rescored import rescored as rescore

pytest.importorskip("distributed")

SHIPPED = Path(__file__).resolve().parents[2] / "cassettes" / "smollm2-135m-catalog.cassette"


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    # The cluster `--dask local:2` starts: loopback only, no HTTP server on 8787, and a unit whose worker dies twice
    # fails rather than being tried a third time.
    with dist.local_client(2) as c:
        yield c


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(None)


@pytest.fixture(scope="module")
def epochs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The shipped real recording cut in two, one cassette per epoch (90 exchanges, 88 results each, every suite),
    each with the recording's header: still large enough to be split into shards."""
    header, records = read_cassette(SHIPPED)
    folder = tmp_path_factory.mktemp("epochs")
    paths = []
    for epoch in ("0", "1"):
        path = folder / f"epoch-{epoch}.cassette"
        writer = CassetteWriter(path, settings=header.settings, run=header.run)
        for record in records:
            if record.tags.get("epoch") == epoch:
                writer.put(record)
        writer.close()
        assert path.stat().st_size >= SHARD_MIN_BYTES
        paths.append(path)
    return paths


@pytest.fixture
def runs(tmp_path: Path, epochs: list[Path]) -> Path:
    """Three cassettes, the shipped recording's two epochs and the first again: more units than workers, shards, and
    half the scoring of three copies of the whole recording."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for name, epoch in (("a", 0), ("b", 1), ("c", 0)):
        shutil.copy(epochs[epoch], folder / f"{name}.cassette")
    return folder


def _scores(path: Path, folder: Path, catalog: Catalog, **kw: Any) -> bytes:
    traffic: list[dict[str, Any]] = []
    meta, results = rescore([folder], catalog=catalog, base=folder, traffic=traffic, **kw)
    write_scores(path, meta, results, traffic)
    return path.read_bytes()


@pytest.mark.slow
def test_dask_scores_are_byte_identical_to_a_local_run(
    client: Any, catalog: Catalog, runs: Path, tmp_path: Path
) -> None:
    local = _scores(tmp_path / "local.jsonl", runs, catalog, jobs=1)
    on_dask = _scores(tmp_path / "dask.jsonl", runs, catalog, dask=client.scheduler.address)
    assert on_dask == local
    assert local.count(b'"kind":"result"') > 100


def _units(runs: Path) -> list[dist.Unit]:
    return dist.resolve_local(plan_units(sorted(runs.glob("*.cassette")), 2))


def _options(runs: Path) -> Options:
    return Options(base=runs.resolve())


def die_once(unit: dist.Unit, catalog: Catalog, options: Options) -> UnitOutput:
    """Fault injection: the worker running b.cassette's unit dies (no exception, the process is gone) the first time."""
    marker = Path(unit[0]).with_suffix(".died")
    if Path(unit[0]).name == "b.cassette" and not marker.exists():
        marker.touch()
        os._exit(1)
    return dist.score_remote(unit, catalog, options)


def fail_always(unit: dist.Unit, catalog: Catalog, options: Options) -> UnitOutput:
    if Path(unit[0]).name == "c.cassette":
        raise ValueError("evaluator exploded\nsecond line")
    return dist.score_remote(unit, catalog, options)


@pytest.mark.slow
def test_a_worker_that_dies_is_replaced_and_its_unit_rerun(client: Any, catalog: Catalog, runs: Path) -> None:
    units = _units(runs)
    expected = dist.run_units(client, units, catalog, _options(runs))
    got = dist.run_units(client, units, catalog, _options(runs), fn=die_once)
    assert (runs / "b.died").exists()
    assert [o.results for o in got] == [o.results for o in expected]
    assert [o.cassettes for o in got] == [o.cassettes for o in expected]


def unit_name_only(unit: dist.Unit, catalog: Catalog, options: Options) -> str:
    return f"{Path(unit[0]).name} {unit[1]}"


def _poll(what: Any) -> Any:
    """`what()` once it is truthy, polled; 30 s is a bound only a broken cluster reaches."""
    for _ in range(300):
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"the cluster never got there: {what}")


@pytest.mark.slow
def test_a_result_lost_with_its_worker_before_it_was_fetched_is_computed_again(
    client: Any, catalog: Catalog, runs: Path
) -> None:
    # The order the soak once met by chance, made here on purpose: every unit finished, then a worker holding results
    # not yet fetched dies. The scheduler computes them again; they are waited for, not reported as failed.
    units = _units(runs)
    got = dist.iter_units(client, units, catalog, _options(runs), fn=unit_name_only)
    first = next(got)

    def finished() -> list[str]:
        keys = [k for k, state in list(client.futures.items()) if "unit_name_only" in str(k)]
        states = [client.futures[k].status for k in keys]
        return keys if len(keys) == len(units) - 1 and all(s == "finished" for s in states) else []

    keys = _poll(finished)
    holders = _poll(lambda: {w for k, ws in client.who_has().items() if k in keys for w in ws})
    victim = sorted(holders)[0]
    with contextlib.suppress(Exception):
        client.run(os._exit, 1, workers=[victim])

    def gone() -> bool:
        return victim not in client.scheduler_info()["workers"]

    _poll(gone)
    rest = list(got)
    assert sorted([first, *rest]) == sorted((i, f"{Path(u[0]).name} {u[1]}") for i, u in enumerate(units))


@pytest.mark.slow
def test_units_whose_scattered_inputs_died_with_every_worker_are_sent_again(
    client: Any, catalog: Catalog, runs: Path
) -> None:
    # The catalog and options are scattered to the workers there are when the rescore starts; if every worker holding
    # them dies (or only one was up, and it dies: a full run of the suite met that), the scheduler cannot recover
    # them, and the units that need them end with no error of their own. They are sent again with them, not reported
    # as failed.
    _poll(lambda: len(client.scheduler_info()["workers"]) == 2)  # both up: the kill below takes every holder
    units = _units(runs)
    got = dist.iter_units(client, units, catalog, _options(runs), fn=unit_name_only)
    first = next(got)
    before = set(client.scheduler_info()["workers"])
    with contextlib.suppress(Exception):
        client.run(os._exit, 1)
    _poll(lambda: not before & set(client.scheduler_info()["workers"]))
    rest = list(got)
    assert sorted([first, *rest]) == sorted((i, f"{Path(u[0]).name} {u[1]}") for i, u in enumerate(units))


def test_a_unit_that_fails_twice_is_named_and_nothing_is_dropped_silently(
    client: Any, catalog: Catalog, runs: Path
) -> None:
    with pytest.raises(BenchError) as err:
        dist.run_units(client, _units(runs), catalog, _options(runs), fn=fail_always)
    message = str(err.value)
    # c.cassette is planned as two shards (three cassettes, two workers): each is a unit, each is named.
    assert "2 unit(s) failed twice" in message
    for shard in (1, 2):
        assert f"c.cassette (shard {shard} of 2): ValueError: evaluator exploded" in message
    assert "a.cassette" not in message and "b.cassette" not in message
    assert "second line" not in message and "\n" not in message


def test_a_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch, runs: Path) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(BenchError, match=r"pip install 'llm-gateway-bench\[dask\]'"):
        rescore([runs], dask="local:1")


def test_an_unreachable_scheduler_is_one_line(monkeypatch: pytest.MonkeyPatch, runs: Path) -> None:
    monkeypatch.setattr(dist, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(BenchError, match=r"cannot reach a Dask scheduler"):
        rescore([runs], dask="tcp://127.0.0.1:9")


@pytest.mark.parametrize("spec", ["local:0", "local:x", "local:"])
def test_a_bad_local_spec_is_one_line(spec: str) -> None:
    with pytest.raises(BenchError, match="local:N"):
        dist.parse_local(spec)


def test_local_specs() -> None:
    assert dist.parse_local("local") == 0
    assert dist.parse_local("local:3") == 3
    assert dist.parse_local("tcp://10.0.0.1:8786") is None


def _listening(process: Any) -> set[tuple[str, int]]:
    found = set()
    for p in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil_error()):
            found |= {(c.laddr.ip, c.laddr.port) for c in p.net_connections(kind="tcp") if c.status == "LISTEN"}
    return found


def psutil_error() -> type[Exception]:
    import psutil

    return psutil.Error


def test_a_local_cluster_listens_only_on_loopback_serves_nothing_over_http_and_leaves_nothing() -> None:
    import psutil

    me = psutil.Process()
    before = _listening(me)
    with dist.connect("local:1") as c:
        during = _listening(me) - before
        http_port = c.scheduler_info()["services"]["dashboard"]
        # No dashboard: the HTTP server the scheduler always starts answers nothing, on a free port, not 8787.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{http_port}/health", timeout=30)
        assert refused.value.code == 404
    assert during and all(ip == "127.0.0.1" for ip, _ in during), during
    assert http_port != 8787 and ("127.0.0.1", http_port) in during
    assert not (_listening(me) - before)
