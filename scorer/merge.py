"""`bench rescore` with memory bounded by the units in flight, not by the run: each unit's results and traffic lines are
encoded as it finishes and spilled in sorted runs (bench.scorer.sorted_runs); at the end the runs are merged, the latest
recording of each job kept, flips found by a merge join with the earlier scores file, and the summary counted, all in
one streaming pass. The file is byte-identical to the one `pipeline.rescore` + `write_scores` would write
(tests/scorer/test_merge.py compares a run spilled at every unit with an in-memory one).
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

from bench.catalog.model import Catalog
from bench.core import storage
from bench.core.errors import BenchError
from bench.scorer.flips import Flip, FlipJoin, FlipMap, in_join_order
from bench.scorer.pipeline import UnitOutput, keep_latest, make_meta, prepare, require_results, sort_key, unit_outputs
from bench.scorer.rescore_summary import Tally
from bench.scorer.results import RESULT_DECODER, Meta, Result
from bench.scorer.rules import Rule
from bench.scorer.scores_io import dumps, scores_reader, write_lines
from bench.scorer.sorted_runs import SPILL_BYTES, Spill, spill_dir
from bench.scorer.traffic_lines import traffic_key

COPY_BLOCK = 1 << 20


@dataclass
class Written:
    """What a streamed rescore wrote: its meta line, the summary's counts, flips (None without an earlier file)."""

    meta: Meta
    tally: Tally
    flips: list[Flip] | None
    traffic: int


def rescore_to_file(
    paths: Sequence[storage.Location],
    out: Path,
    *,
    catalog: Catalog | None = None,
    jobs: int = 1,
    max_tokens: int | None = None,
    deadline_s: float | None = None,
    suites: Sequence[str] = (),
    models: Sequence[str] = (),
    rules: Sequence[Rule] = (),
    dask: str | None = None,
    previous: Path | None = None,
    spill_bytes: int = SPILL_BYTES,
) -> Written:
    """Score every cassette under `paths` into the scores file `out` (written atomically, only if every unit was
    scored); `previous`, an earlier scores file, is compared with for flips."""
    catalog, files, options = prepare(
        paths,
        catalog=catalog,
        max_tokens=max_tokens,
        deadline_s=deadline_s,
        suites=suites,
        models=models,
        base=out.parent,
        rules=rules,
    )
    with contextlib.ExitStack() as stack:
        earlier = None
        if previous is not None:
            # Opened (and its meta line checked) before the run, so a wrong file fails before any work is done.
            earlier = stack.enter_context(scores_reader(previous, exchanges=False))
            in_order = in_join_order(previous)
        try:
            tmp = Path(stack.enter_context(spill_dir(out.parent)))
        except OSError as exc:
            raise BenchError(f"cannot write next to {out}: {exc.strerror}; choose another --out") from None
        results = Spill(tmp, "results", spill_bytes)
        traffic = Spill(tmp, "traffic", spill_bytes)
        done: dict[int, UnitOutput] = {}
        for i, output in unit_outputs(files, catalog, options, jobs=jobs, dask=dask):
            results.add(i, ((sort_key(r), dumps(r)) for r in output.results))
            traffic.add(i, ((traffic_key(t), dumps(t)) for t in output.traffic))
            # What stays of a unit until the end is its cassette's header and its warnings.
            output.results, output.traffic = [], []
            done[i] = output
        outputs = [done[i] for i in sorted(done)]
        created = {o.cassette.path: o.cassette.created or "" for o in outputs if o.cassette is not None}
        tally = Tally()
        flips: FlipJoin | FlipMap | None = None
        if earlier is not None:
            # What explains a flip (versions, budgets) is known before the merge; the warnings come after it.
            old_meta, old = earlier
            new_meta = make_meta(catalog, options, outputs, Counter())
            flips = FlipJoin(old_meta, new_meta, old) if in_order else FlipMap(old_meta, new_meta, old)
        superseded: Counter[str] = Counter()
        body = tmp / "results.jsonl"
        with open(body, "wb") as fh:
            decoded = ((_decoded(line), line) for _key, _unit, _seq, line in results.merged())
            for result, line in keep_latest(decoded, itemgetter(0), created, superseded):
                fh.write(line)
                tally.add(result)
                if flips is not None:
                    flips.see(result)
        meta = make_meta(catalog, options, outputs, superseded)
        require_results(meta, tally.results, paths, traffic.count)
        write_lines(out, itertools.chain([dumps(meta)], _copy(body), _lines(traffic.merged())))
    return Written(meta=meta, tally=tally, flips=None if flips is None else flips.flips, traffic=traffic.count)


def _decoded(line: bytes) -> Result:
    result = RESULT_DECODER.decode(line)
    result.exchanges = []  # the summary and flips read scores only
    return result


def _copy(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while block := fh.read(COPY_BLOCK):
            yield block


def _lines(entries: Iterator[tuple[object, int, int, bytes]]) -> Iterator[bytes]:
    for entry in entries:
        yield entry[3]
