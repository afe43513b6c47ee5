"""A real S3 API for tests: moto's server mode on 127.0.0.1 (one per session), and an s3fs client on it with one
empty bucket. bench finds the endpoint in fsspec's config, as FSSPEC_S3_ENDPOINT_URL would set it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

BUCKET = "bench-runs"


def start_moto() -> tuple[Any, str]:
    """moto's S3 server started on a free port of 127.0.0.1, and its endpoint URL; the caller stops it. The tests'
    fixture and the object-storage benchmarks share it."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    server, endpoint = start_moto()
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An s3fs filesystem on the moto server, with one empty bucket; bench finds the endpoint in fsspec's config."""
    import fsspec.config
    import s3fs

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # What FSSPEC_S3_ENDPOINT_URL sets when fsspec is imported (it already is, so set the config it fills).
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": s3_server})
    s3fs.S3FileSystem.clear_instance_cache()
    fs = fsspec.filesystem("s3")
    if fs.exists(BUCKET):
        fs.rm(BUCKET, recursive=True)
    fs.mkdir(BUCKET)
    yield fs
    s3fs.S3FileSystem.clear_instance_cache()
