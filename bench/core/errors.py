"""The one exception type for user errors.

Anything raised as BenchError is the user's to fix (bad flag, bad file, unreachable upstream); the CLI turns it
into a single line. Every other exception is a bug and keeps its traceback.
"""


class BenchError(Exception):
    """A user-facing error: the message names the problem and the fix, on one line."""


class CassetteError(BenchError):
    """A cassette file that cannot be read: foreign, corrupt or of an unknown format version."""
