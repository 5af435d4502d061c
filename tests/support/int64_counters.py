"""The 64-bit counter rules the ``sqlite`` and ``redis`` backends share (``aeon_plugins.sqlite_memory``'s
``check_amount`` and ``increment_error``), on top of the generic increment contract in the conformance kit.

A backend's test module subclasses :class:`Int64CounterCases` and provides a ``counter`` fixture.
"""

from __future__ import annotations

from typing import Any

import pytest

from aeon_kernel import Memory, MemoryStoreError


class Int64CounterCases:
    def test_increment_continues_a_written_integer(self, counter: Memory) -> None:
        counter.write("c", 41)
        assert counter.increment("c") == 42
        counter.write("c", "reset")
        with pytest.raises(
            MemoryStoreError, match=r"cannot increment 'c': it holds \"reset\", not a 64-bit integer"
        ):
            counter.increment("c")

    @pytest.mark.parametrize("stored", [1.0, 1.5, True, None, "1", [1], {"n": 1}, 2**63, -(2**63) - 1])
    def test_increment_refuses_what_is_not_an_int64_and_changes_nothing(
        self, counter: Memory, stored: Any
    ) -> None:
        counter.write("c", stored)
        with pytest.raises(MemoryStoreError, match="not a 64-bit integer"):
            counter.increment("c")
        assert counter.read("c") == stored

    def test_increment_refuses_to_overflow(self, counter: Memory) -> None:
        counter.write("top", 2**63 - 1)
        with pytest.raises(MemoryStoreError, match="64-bit integer range"):
            counter.increment("top")
        assert counter.read("top") == 2**63 - 1
        assert counter.increment("top", -1) == 2**63 - 2
        counter.write("bottom", -(2**63))
        with pytest.raises(MemoryStoreError, match="range"):
            counter.increment("bottom", -1)
        assert counter.read("bottom") == -(2**63)

    @pytest.mark.parametrize("amount", [True, 1.0, "1", None, 2**63])
    def test_increment_refuses_bad_amounts(self, counter: Memory, amount: Any) -> None:
        with pytest.raises(MemoryStoreError, match="amount"):
            counter.increment("c", amount)
        assert counter.read("c") is None
