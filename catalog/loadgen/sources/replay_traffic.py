"""Recorded traffic as a workload (`--replay-traffic CASSETTES`): every request some client made through the proxy,
sent again byte for byte (body, so `tools` and `tool_choice` too; path and query; the recorded headers a client may
resend, without credentials, connection headers or the recording's tags), on the recorded schedule: each request's
`at_us` is its start after the first request's, which the run divides by `--speed`.

Traffic recorded by other tools too: a file that is not a cassette is read as OTel GenAI traces in OTLP JSON or an
OpenAI-format request log (bench.core.traffic_files), each request at its recorded start; one without a recorded time
is refused (untimed request bodies are `--dataset`'s).

Requests the proxy served from a cassette (`mode: replay`) were already a replay of a recorded request and are left
out; recordings (`record`, `auto-record`) are taken. Only the requests are kept in memory, not the answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec

from bench.catalog.loadgen.sender import resendable
from bench.catalog.loadgen.work import LoadRequest, SourceOptions, Work, workload_source
from bench.core.cassette import SUFFIX, CassetteReader, find_cassettes
from bench.core.errors import BenchError
from bench.core.traffic_files import imported_exchanges

RECORDED_MODES = ("record", "auto-record")


def recorded_requests(paths: list[str]) -> list[LoadRequest]:
    """The recorded requests of these cassettes (or folders) and trace or log files, in the order they started, timed
    from the first."""
    files = [p for p in paths if not Path(p).is_dir() and not p.endswith(SUFFIX)]
    cassettes = [p for p in paths if p not in files]
    found = _imported(files) if files else []
    for path in find_cassettes(cassettes) if cassettes else ():
        reader = CassetteReader(path)
        for record in reader:
            if record.mode not in RECORDED_MODES or not record.request.method:
                continue
            request = record.request
            found.append(
                (
                    record.started,
                    LoadRequest(
                        path=request.path + (f"?{request.query}" if request.query else ""),
                        body=request.body,
                        method=request.method,
                        headers=resendable(request.headers),
                        origin=f"{path.name}#{record.id}",
                        model=record.tags.get("model"),
                    ),
                )
            )
    if not found:
        raise BenchError(f"--replay-traffic {' '.join(paths)}: no recorded requests in it")
    found.sort(key=lambda pair: pair[0])
    first = found[0][0]
    return [msgspec.structs.replace(req, at_us=started - first) for started, req in found]


def _imported(files: list[str]) -> list[tuple[int, LoadRequest]]:
    found = []
    for e in imported_exchanges(Path(f) for f in files):
        if e.started_us is None:
            raise BenchError(
                f"--replay-traffic {e.origin}: no time recorded for this request; it resends on the recorded "
                "schedule (give untimed request bodies to --dataset)"
            )
        request = LoadRequest(path=e.path, body=e.body, method=e.method, origin=e.origin, model=e.model)
        found.append((e.started_us, request))
    return found


@workload_source("replay", scheduled=True, help="recorded requests, resent on their recorded schedule")
def replay_traffic(options: SourceOptions) -> Iterator[Work]:
    if not options.arg:
        raise BenchError("--replay-traffic needs cassettes: a file or a folder of them")
    return iter(recorded_requests(options.arg.split("\n")))
