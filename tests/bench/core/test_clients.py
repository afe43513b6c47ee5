from __future__ import annotations

import pytest

from bench.core.clients import client_family, header


@pytest.mark.parametrize(
    ("ua", "family"),
    [
        ("OpenAI/Python 1.51.0", "OpenAI/Python"),
        ("AsyncOpenAI/Python 1.99.1", "AsyncOpenAI/Python"),
        ("python-httpx/0.27.0", "python-httpx"),
        ("Python/3.11 aiohttp/3.9.5", "Python aiohttp"),
        ("curl/8.5.0", "curl"),
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0", "Mozilla AppleWebKit"),
        ("", "(none)"),
        (None, "(none)"),
        ("1.2.3", "(none)"),
    ],
)
def test_client_family(ua: str | None, family: str) -> None:
    assert client_family(ua) == family


def test_header_lookup_is_case_insensitive() -> None:
    assert header([["User-Agent", "curl/8"], ["x", "y"]], "user-agent") == "curl/8"
    assert header(None, "user-agent") is None
