"""Caches the loop keeps across runs are bounded: classes made on the fly cannot grow them."""

from __future__ import annotations

from treadle.loop import _tool_table as state


def test_the_toolset_class_cache_stays_bounded() -> None:
    for n in range(3 * state._TOOLSET_TYPES_KEPT):
        cls = type(f"Made{n}", (), {"get_tools": (lambda self: []) if n % 2 else None})
        assert state._is_toolset(cls) is bool(n % 2)
    assert len(state._TOOLSET_TYPES) <= state._TOOLSET_TYPES_KEPT
