"""`bench cassette upgrade`: rewrite older cassettes as the current format, verified before the original is replaced.

Readers already migrate old records on the fly (bench.core.cassette.migrate); upgrading a file gives it what only the
current layout has: v2's per-record checksums (damage is detected and the records after it recovered) and its
compact, recompressed storage. The new file is read back and every record compared with the old one before it
replaces the original by a rename; a damaged original is refused, since what it lost could not be put back.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from bench.core.cassette import columns, compact
from bench.core.cassette.envelope import frame_record
from bench.core.cassette.format import FORMAT_VERSION
from bench.core.cassette.reader import CassetteReader
from bench.core.cassette.records import encode, encode_exchange
from bench.core.errors import BenchError


def upgrade_file(path: Path, level: int = compact.ARCHIVE_LEVEL) -> str:
    """Rewrite `path` as the current version; returns the line to print. Raises BenchError if it cannot."""
    reader = CassetteReader(path)
    if reader.version >= FORMAT_VERSION:
        return f"{path}: already format v{reader.version}; left as it is"
    header = msgspec.structs.replace(reader.header, version=FORMAT_VERSION)
    records = list(reader)
    if reader.damaged:  # a cut recording (no end record, no damage) is upgraded as it is
        raise BenchError(f"{reader.problem}; not upgraded (the upgrade cannot restore what is lost)")
    # The writer's packing without redaction: the records were redacted when written.
    payloads = [columns.payload(*encode_exchange(r)) for r in records]
    if reader.end is not None:
        payloads.append(columns.payload(encode(reader.end), None))
    raw = b"".join(frame_record(seq, payload) for seq, payload in enumerate(payloads, start=1))
    before = path.stat().st_size

    def verify(tmp: Path) -> None:
        check = CassetteReader(tmp)
        got = list(check)
        same_header = check.header == header
        if not same_header or got != records or check.end != reader.end or check.lost:
            raise BenchError(f"{path}: the upgraded copy did not read back the same; the original is unchanged")

    try:
        compact.replace_atomically(
            path, [compact.header_frame(header, level), *compact.segment_frames(raw, level)], verify
        )
    except compact.NotClean as exc:
        raise BenchError(f"{path}: could not recompress it ({exc}); the original is unchanged") from None
    except OSError as exc:
        raise BenchError(f"{path}: cannot write the upgraded copy: {exc.strerror}; the original is unchanged") from None
    after = path.stat().st_size
    return (
        f"{path}: upgraded v{reader.version} -> v{FORMAT_VERSION}, {len(records)} exchange(s) verified, "
        f"{before} -> {after} bytes"
    )
