"""bench.core.parsed helpers: the compact form of an exchange's gaps."""

from __future__ import annotations

from array import array

from bench.core.parsed import compact_itl


def test_compact_itl_takes_int32_then_int64_and_keeps_an_array_as_it_is() -> None:
    small = compact_itl([1, 2, 2**31 - 1])
    assert (small.typecode, small.tolist()) == ("i", [1, 2, 2**31 - 1])
    wide = compact_itl([1, 2**31])
    assert (wide.typecode, wide.tolist()) == ("q", [1, 2**31])
    held = array("i", [5, 6])
    assert compact_itl(held) is held  # compacted once, shared by a traffic line and its turn
    assert compact_itl([]).tolist() == []
