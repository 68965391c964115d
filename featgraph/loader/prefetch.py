"""Work ahead in a background thread, so sampling the next batches overlaps training on this one.

One thread makes the results in order into a bounded queue. Threads suffice: the sampler's compiled code is
called through ctypes, which releases the GIL for the call, and torch's gathers release it too, so the
thread's work runs beside the training step rather than between its Python statements.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

_DONE, _FAILED, _MADE = range(3)
_POLL_S = 0.1  # how often a producer blocked on a full queue looks whether the consumer has gone


def prefetched(items: Iterable[Item], make: Callable[[Item], Result], depth: int) -> Iterator[Result]:
    """``make(item)`` for every item, in order. With ``depth > 0`` a background thread works up to ``depth``
    results ahead; an exception it raises is raised here, at the result it would have made, and leaving the
    loop early stops the thread. ``depth = 0`` makes each result when it is asked for."""
    if depth == 0:
        return map(make, items)
    return _in_background(items, make, depth)


def _in_background(items: Iterable[Item], make: Callable[[Item], Result], depth: int) -> Iterator[Result]:
    results: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[int, Any]) -> bool:
        """Queue ``entry`` unless the consumer has gone; whether it was queued."""
        while not stop.is_set():
            try:
                results.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((_MADE, make(item))):
                    return
        except BaseException as error:  # handed to the consumer, which raises it
            put((_FAILED, error))
            return
        put((_DONE, None))

    thread = threading.Thread(target=produce, name="featgraph-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = results.get()
            if kind == _DONE:
                return
            if kind == _FAILED:
                raise value
            yield value
    finally:
        stop.set()
        thread.join()
