"""``Recent``: a mapping that keeps its most recently used entries, for the process-wide caches of values
rebuilt cheaply where missing (generated sources, traced UDFs, structure numbers, tile lists)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Value = TypeVar("Value")


class Recent(Generic[Value]):
    """At most ``size`` entries; a lookup marks its entry used, and an insertion past ``size`` drops the
    least recently used one."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self._entries: OrderedDict[Hashable, Value] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def get(self, key: Hashable, build: Callable[[], Value]) -> Value:
        """The entry of ``key``, built by ``build()`` and kept where missing (a ``build`` that raises keeps
        nothing)."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        value = self._entries[key] = build()
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value
