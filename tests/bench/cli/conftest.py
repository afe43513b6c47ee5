"""The commands' tests use the fixtures of the packages each command drives: a paced upstream (the proxy's) and a
scored copy of the shipped recording (the view's)."""

from tests.bench.view.conftest import smollm2_dir, smollm2_index
from tests.proxy.conftest import cassettes, upstream

__all__ = ["cassettes", "smollm2_dir", "smollm2_index", "upstream"]
