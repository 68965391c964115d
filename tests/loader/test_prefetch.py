"""prefetched: results in order, errors where they happened, a stopped thread when the loop is left early, and
work that overlaps the consumer's."""

from __future__ import annotations

import threading
import time

import pytest

from featgraph.loader.prefetch import prefetched


def prefetch_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "featgraph-prefetch"]


@pytest.mark.parametrize("depth", [0, 1, 3])
@pytest.mark.parametrize("count", [0, 1, 10])
def test_results_come_in_order(depth, count):
    assert list(prefetched(range(count), lambda item: item * item, depth)) == [i * i for i in range(count)]
    assert not prefetch_threads()


@pytest.mark.parametrize("depth", [0, 2])
def test_an_error_is_raised_at_the_item_that_failed(depth):
    def make(item: int) -> int:
        if item == 3:
            raise KeyError("item 3")
        return item

    seen = []
    with pytest.raises(KeyError, match="item 3"):
        for value in prefetched(range(10), make, depth):
            seen.append(value)
    assert seen == [0, 1, 2] and not prefetch_threads()


def test_leaving_the_loop_early_stops_the_thread_within_its_depth():
    made = []
    results = prefetched(range(1000), lambda item: made.append(item) or item, 2)
    assert [next(results), next(results)] == [0, 1]
    results.close()
    assert not prefetch_threads()
    assert len(made) <= 2 + 2 + 1  # taken, queued, and the one being put when the loop was left


def test_work_in_the_thread_overlaps_the_consumer():
    def make(item: int) -> int:
        time.sleep(0.05)  # like the sampler's compiled code: the GIL is released meanwhile
        return item

    start = time.perf_counter()
    for _ in prefetched(range(8), make, 2):
        time.sleep(0.05)  # the training step
    overlapped = time.perf_counter() - start
    assert overlapped < 0.75 * (8 * 0.1)  # one after the other: 0.8 s; overlapped: about 0.45 s
