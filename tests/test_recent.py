"""``Recent`` against a list that keeps keys in order of use, over random sequences of lookups."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from featgraph.recent import Recent


@given(st.integers(1, 4), st.lists(st.integers(0, 6), max_size=40))
def test_recent_keeps_the_most_recently_used_keys_and_builds_only_the_missing(size, keys):
    recent: Recent[str] = Recent(size)
    order: list[int] = []  # the reference: least recently used first
    for key in keys:
        built: list[int] = []
        value = recent.get(key, lambda key=key, built=built: built.append(key) or f"v{key}")
        assert value == f"v{key}"
        assert built == ([] if key in order else [key])
        if key in order:
            order.remove(key)
        order = [*order, key][-size:]
        assert len(recent) == len(order) and all(k in recent for k in order)


def test_a_failed_build_keeps_nothing_and_a_bad_size_is_named():
    recent: Recent[int] = Recent(2)

    def fail() -> int:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        recent.get("k", fail)
    assert "k" not in recent and len(recent) == 0
    with pytest.raises(ValueError, match="size must be at least 1, got 0"):
        Recent(0)
