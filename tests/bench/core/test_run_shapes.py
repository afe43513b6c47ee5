"""A run's shape guessed from two reads (bench.core.run_shapes): the common prefix and suffix they are cut from."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.core.run_shapes import _common_prefix, _common_suffix


@given(a=st.binary(max_size=40), b=st.binary(max_size=40), shared=st.binary(max_size=8))
def test_common_prefix_and_suffix_are_the_longest_shared(a: bytes, b: bytes, shared: bytes) -> None:
    for x, y in ((shared + a, shared + b), (a + shared, b + shared), (a, a), (a, b)):
        prefix = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), min(len(x), len(y)))
        suffix = next((i for i in range(min(len(x), len(y))) if x[-1 - i] != y[-1 - i]), min(len(x), len(y)))
        assert (_common_prefix(x, y), _common_suffix(x, y)) == (prefix, suffix)
