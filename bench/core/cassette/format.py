"""Constants of the cassette format (docs/cassette-format.md is the reference)."""

from __future__ import annotations

FORMAT_NAME = "bench-cassette"
FORMAT_VERSION = 2
SUFFIX = ".cassette"

# Record kinds; every record is a msgpack map with a "kind" key.
HEADER = "header"
EXCHANGE = "exchange"
END = "end"
# A piece of a large response body written while the exchange was still running; its exchange record refers to it.
PART = "part"

# Outcomes of an exchange.
COMPLETE = "complete"
CLIENT_DISCONNECTED = "client_disconnected"
UPSTREAM_ERROR = "upstream_error"
TIMEOUT = "timeout"
TRUNCATED = "truncated"
OUTCOMES = (COMPLETE, CLIENT_DISCONNECTED, UPSTREAM_ERROR, TIMEOUT, TRUNCATED)

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

# v2: a zstd frame ends after the batch that brings it past this many bytes of framed records. A reader resumes at
# the next frame after damage that breaks the zstd stream, so this bounds what such damage can take; each new frame
# forgets the repeated envelopes of the last, so much smaller frames cost ratio (1 MiB: -15% on a real recording).
SEGMENT_BYTES = 4 << 20
