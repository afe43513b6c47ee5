"""Fixtures shared by tests/bench."""

from tests.support.s3 import s3, s3_server  # noqa: F401 - fixtures
