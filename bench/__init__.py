"""bench: record LLM gateway traffic once, re-score it forever."""

__version__ = "0.1.0"
