"""Constants of the cassette format (docs/cassette-format.md is the reference)."""

from __future__ import annotations

FORMAT_NAME = "bench-cassette"
FORMAT_VERSION = 1
SUFFIX = ".cassette"

# Record kinds; every record is a msgpack map with a "kind" key.
HEADER = "header"
EXCHANGE = "exchange"
END = "end"

# Outcomes of an exchange.
COMPLETE = "complete"
CLIENT_DISCONNECTED = "client_disconnected"
UPSTREAM_ERROR = "upstream_error"
TIMEOUT = "timeout"
TRUNCATED = "truncated"
OUTCOMES = (COMPLETE, CLIENT_DISCONNECTED, UPSTREAM_ERROR, TIMEOUT, TRUNCATED)

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
