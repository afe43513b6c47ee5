"""Writing format v1 files in tests, as bench 0.1's writer did: one zstd frame, msgpack records, a block per batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import zstandard

FIXTURE = Path(__file__).parent / "fixtures" / "smollm2-v1-small.cassette"


def write_v1(path: Path, header: dict[str, Any], records: list[dict[str, Any]], end: dict[str, Any] | None) -> int:
    """Write a v1 cassette; without `end` the frame is left open, as a killed recorder leaves it. Returns the
    decompressed size."""
    packer = msgpack.Packer(use_bin_type=True)
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    out = []
    raw = 0
    for record in [header, *records, *([end] if end is not None else [])]:
        data = packer.pack(record)
        raw += len(data)
        out.append(cobj.compress(data))
        out.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
    if end is not None:
        out.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
    path.write_bytes(b"".join(out))
    return raw


def v1_header(**run: Any) -> dict[str, Any]:
    return {"kind": "header", "format": "bench-cassette", "version": 1, "settings": {"mode": "record"}, "run": run}
