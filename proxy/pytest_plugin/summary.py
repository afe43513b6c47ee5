"""The `bench` section of pytest's terminal summary, from every bench test's outcome."""

from __future__ import annotations

from typing import Any

import msgspec

from bench.proxy.pytest_plugin.recording import Outcome

MAX_LISTED = 20


def summarize(raw: list[dict[str, Any]]) -> list[str]:
    outcomes = [msgspec.convert(o, Outcome) for o in raw]
    if not outcomes:
        return []
    lines: list[str] = []
    replayed = [o for o in outcomes if o.replayed]
    if replayed:
        paces = sorted({o.pace for o in replayed})
        lines.append(
            f"replayed {sum(o.replayed for o in replayed)} exchange(s) in {len(replayed)} test(s) at pace "
            f"{', '.join(paces)}: their timing is the recording's, replayed, not measured from a model"
        )
    recorded = [o for o in outcomes if o.recorded]
    if recorded:
        lines.append(
            f"recorded {sum(o.recorded for o in recorded)} new exchange(s) into "
            f"{len({o.cassette for o in recorded})} cassette(s)"
        )
    unused = [o for o in outcomes if o.unused]
    if unused:
        lines.append(
            f"recorded but never requested: {sum(len(o.unused) for o in unused)} exchange(s) in {len(unused)} "
            "cassette(s) (--bench-fail-on-unused makes this a failure; --bench-record-mode=all records anew):"
        )
        lines.extend(f"  {o.cassette}: {', '.join(o.unused)}" for o in unused[:MAX_LISTED])
    stale = {o.cassette: o.stale for o in outcomes if o.stale}
    if stale:
        lines.append(f"stale cassettes: {len(stale)} (record them again with --bench-record-mode=all):")
        lines.extend(f"  {path}: {why}" for path, why in list(stale.items())[:MAX_LISTED])
    return lines
