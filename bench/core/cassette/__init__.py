"""The cassette format: msgpack records in one zstd stream per file (docs/cassette-format.md)."""

from bench.core.cassette.format import FORMAT_VERSION, SUFFIX
from bench.core.cassette.reader import CassetteReader, find_cassettes, read_cassette
from bench.core.cassette.redact import Redactor
from bench.core.cassette.writer import CassetteWriter, WriterStats, new_cassette_path

__all__ = [
    "FORMAT_VERSION",
    "SUFFIX",
    "CassetteReader",
    "CassetteWriter",
    "Redactor",
    "WriterStats",
    "find_cassettes",
    "new_cassette_path",
    "read_cassette",
]
