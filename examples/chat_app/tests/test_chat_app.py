"""The application's tests. `pytestmark` puts every test here under bench: recorded once from a real server
(`pytest --bench-record-mode=once`), then replayed offline by every later run (`pytest`)."""

from __future__ import annotations

import asyncio

import chat_app
import pytest

pytestmark = pytest.mark.bench


def test_summarize() -> None:
    summary = chat_app.summarize("The cat sat on the mat all afternoon, watching birds.")
    assert summary.strip()


def test_stream_story() -> None:
    pieces = list(chat_app.stream_story("a lighthouse"))
    assert len(pieces) > 1  # it arrived as a stream, several pieces
    assert "".join(pieces).strip()


def test_async_answer() -> None:
    assert asyncio.run(chat_app.answer("What is the capital of France?")).strip()


def test_weather_tool_call() -> None:
    name, arguments = chat_app.weather_request("Paris")
    assert name == "get_weather"
    assert isinstance(arguments, dict)


def test_same_question_twice() -> None:
    # Asked twice, answered twice: replay serves each recorded answer in turn.
    first = chat_app.summarize("Rain fell on the quiet town.")
    second = chat_app.summarize("Rain fell on the quiet town.")
    assert first.strip() and second.strip()
