"""Token counts from `usage`, as each OpenAI API writes it (the field names are the APIs' documented ones)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.core.usage import Tokens, usage_tokens


@pytest.mark.parametrize(
    ("usage", "want"),
    [
        # Chat Completions (and legacy Completions): cached input under prompt_tokens_details.
        (
            {
                "prompt_tokens": 12,
                "completion_tokens": 7,
                "total_tokens": 19,
                "prompt_tokens_details": {"cached_tokens": 4},
            },
            Tokens(12, 4, 7),
        ),
        ({"prompt_tokens": 12, "completion_tokens": 7}, Tokens(12, None, 7)),
        # Embeddings: input only.
        ({"prompt_tokens": 5, "total_tokens": 5}, Tokens(5, None, None)),
        # The Responses API: input/output, cached input under input_tokens_details.
        (
            {"input_tokens": 30, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 0}},
            Tokens(30, 0, 9),
        ),
        ({"output_tokens": 9}, Tokens(None, None, 9)),  # either Responses field names the API
        ({"input_tokens": 30, "prompt_tokens_details": {"cached_tokens": 3}}, Tokens(30, None, None)),
        # What is not a count is no count: bools, negatives, floats, strings, details that are not a map.
        ({"prompt_tokens": True, "completion_tokens": -1}, Tokens(None, None, None)),
        ({"prompt_tokens": 1.0, "completion_tokens": "2", "prompt_tokens_details": [4]}, Tokens(None, None, None)),
        ({"prompt_tokens": 0, "completion_tokens": 0}, Tokens(0, None, 0)),
        ({"input_tokens": 1, "input_tokens_details": "4"}, Tokens(1, None, None)),
        ({}, Tokens()),
        (None, Tokens()),
        ([1, 2], Tokens()),
    ],
)
def test_usage_tokens(usage: Any, want: Tokens) -> None:
    assert usage_tokens(usage) == want
