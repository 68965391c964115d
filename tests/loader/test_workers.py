"""Loaders with worker processes against the same loaders' background thread: the same batches in the same
order (several live iterators of one loader too), a memory-mapped array sent as its file (a copy-on-write one
as its values), a worker's exception raised in the parent as its own type, a batch that does not pickle named
by its field, a worker's death named and survived, and bad input named. Each scenario runs under a time limit
and leaves no worker process or shared memory segment behind."""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable, Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any, NamedTuple

import numpy as np
import psutil
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.loader import BlockLoader, LinkNeighborLoader, NeighborLoader
from featgraph.loader.workers import _pickled_batch

torch_geometric = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402 - after the importorskip

LIMIT_S = 180.0  # a scenario still running after this long has hung (spawned workers start in seconds)
SHM = "/dev/shm"


def ring(n: int = 300) -> Graph:
    src = torch.arange(n)
    return Graph(torch.cat([src, src]), torch.cat([(src + 1) % n, (src + 7) % n]), n)


def ring_data(n: int = 300) -> Data:
    return Data(x=torch.randn(n, 4, generator=torch.Generator().manual_seed(0)), edge_index=torch.stack(ring(n).coo()))


def bounded(scenario: Callable[[], Any], seconds: float = LIMIT_S) -> Any:
    """``scenario()`` in a thread, failing (rather than hanging) if it runs past ``seconds``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = scenario()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name="worker-scenario", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the scenario hung: still running after {seconds:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def children() -> set[int]:
    """This process's child processes (multiprocessing's resource tracker aside: it lives as long as we do)."""
    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if not any("resource_tracker" in part for part in child.cmdline()):
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def segments() -> set[str]:
    return set(os.listdir(SHM)) if os.path.isdir(SHM) else set()


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """After the test (its loaders gone): no new child process, live ``multiprocessing`` child or shared
    memory segment."""
    processes, shared = children(), segments()
    yield
    gc.collect()
    leaked: tuple = ()
    for _ in range(50):  # a stopped pool's processes are joined; allow the kernel a moment
        alive = [p for p in multiprocessing.active_children() if p.pid not in processes]
        leaked = (children() - processes, alive, segments() - shared)
        if not any(leaked):
            return
        threading.Event().wait(0.1)
    raise AssertionError(f"left behind: child processes {leaked[0]}, {leaked[1]}, shared memory {leaked[2]}")


def same(a: Data, b: Data) -> bool:
    return (
        torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
        and a.batch_size == b.batch_size
    )  # fmt: skip


class NeedsTwo(Exception):
    """An exception whose constructor takes more than its message (pickle cannot rebuild it by calling it)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def fails(batch):
    raise ValueError("transform failed in the worker")


def needs_two(batch):
    raise NeedsTwo("a two-argument exception", 7)


def local_type(batch):
    class Local(Exception):  # a type pickle cannot find by name
        pass

    raise Local("an exception of a local type")


def unpicklable(batch):
    batch.lock = threading.Lock()
    return batch


def exits(batch):  # kills its worker
    os._exit(3)


class Scripted:
    """A transform whose n-th call (in its worker's copy) does ``actions[n]``."""

    def __init__(self, *actions: Callable[[Any], Any]) -> None:
        self.actions, self.calls = actions, 0

    def __call__(self, batch: Any) -> Any:
        self.calls += 1
        return self.actions[self.calls - 1](batch)


def test_worker_processes_give_the_threads_batches_from_a_memory_mapped_array(tmp_path, no_leaks):
    features = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32, shape=(300, 5))
    features[:] = np.random.default_rng(0).standard_normal((300, 5))
    features.flush()
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")

    def scenario() -> None:
        data = Data(x=mapped, edge_index=torch.stack(ring().coo()), num_nodes=300)  # PyG keeps the memmap
        thread = NeighborLoader(data, [3, 2], batch_size=64, shuffle=True, seed=1)
        workers = NeighborLoader(data, [3, 2], batch_size=64, shuffle=True, seed=1, worker_processes=2)
        for _ in range(2):  # the pool outlives an epoch
            ours, theirs = list(workers), list(thread)
            assert len(ours) == len(theirs) == 5
            for a, b in zip(ours, theirs, strict=True):
                assert same(a, b) and torch.equal(a.x, torch.from_numpy(features[a.n_id.numpy()]))
        # the pool, once started, sends a memory-mapped array as its file
        again = ForkingPickler.loads(ForkingPickler.dumps(mapped))
        assert isinstance(again, np.memmap) and again.filename == mapped.filename and np.array_equal(again, mapped)
        blocks = BlockLoader(ring(), [2], 100, seed=0, worker_processes=1)
        assert [b.seeds.tolist() for b in blocks] == [b.seeds.tolist() for b in BlockLoader(ring(), [2], 100, seed=0)]

    bounded(scenario)


def test_a_copy_on_write_memmap_travels_as_its_values(tmp_path, no_leaks):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((300, 5)).astype(np.float32))
    mapped = np.load(tmp_path / "x.npy", mmap_mode="c")
    mapped[::2] += 100.0  # in this process's memory only, never in the file

    def scenario() -> None:
        data = Data(x=mapped, edge_index=torch.stack(ring().coo()), num_nodes=300)
        thread = NeighborLoader(data, [3], batch_size=100, seed=1)
        workers = NeighborLoader(data, [3], batch_size=100, seed=1, worker_processes=1)
        for a, b in zip(workers, thread, strict=True):
            assert same(a, b) and torch.equal(a.x, torch.from_numpy(mapped[a.n_id.numpy()]))
        again = ForkingPickler.loads(ForkingPickler.dumps(mapped))
        assert not isinstance(again, np.memmap) and np.array_equal(again, mapped)
        del workers

    bounded(scenario)


def test_live_iterators_of_one_loader_each_get_the_threads_batches(no_leaks):
    def scenario() -> None:
        data = ring_data()
        workers = NeighborLoader(data, [3, 2], batch_size=60, shuffle=True, seed=3, prefetch=1, worker_processes=2)
        thread = NeighborLoader(data, [3, 2], batch_size=60, shuffle=True, seed=3)
        pairs = zip(zip(workers, workers, strict=True), zip(thread, thread, strict=True), strict=True)
        assert all(same(a, c) and same(b, d) for (a, b), (c, d) in pairs)
        nested = [(a, b) for a in workers for b in workers]
        expected = [(c, d) for c in thread for d in thread]
        assert len(nested) == len(expected) == 25
        assert all(same(a, c) and same(b, d) for (a, b), (c, d) in zip(nested, expected, strict=True))

        @settings(max_examples=15, deadline=None, database=None)
        @given(st.lists(st.integers(0, 2), max_size=14))
        def interleaved(schedule: list[int]) -> None:
            """Any interleaving of three live iterators' next() calls, each left wherever the schedule stops."""
            ours, theirs = [iter(workers) for _ in range(3)], [iter(thread) for _ in range(3)]
            for k in schedule:
                a, b = next(ours[k], None), next(theirs[k], None)
                assert (a is None and b is None) or same(a, b)

        interleaved()

    bounded(scenario)


def test_a_workers_exception_is_raised_here_as_its_type_and_a_batch_that_does_not_pickle_by_its_field(no_leaks):
    # one worker, one batch in flight: the n-th batch asked for is the transform's n-th call in that worker
    def scenario() -> None:
        script = Scripted(fails, needs_two, local_type, unpicklable, exits)
        loader = LinkNeighborLoader(ring_data(), [2], batch_size=50, transform=script, prefetch=0, worker_processes=1)
        with pytest.raises(ValueError, match="transform failed in the worker") as raised:
            next(iter(loader))
        assert "Raised in loader worker 0" in raised.value.__notes__[0] and "in fails" in raised.value.__notes__[0]
        with pytest.raises(NeedsTwo, match="a two-argument exception") as raised:  # not pickle's TypeError
            next(iter(loader))
        assert raised.value.code == 7 and "in needs_two" in raised.value.__notes__[0]
        with pytest.raises(RuntimeError, match=r"worker 0 raised .*local_type.<locals>.Local: an exception of a lo"):
            try:
                next(iter(loader))
            except RuntimeError as error:
                assert "The worker's traceback:" in str(error) and "in local_type" in str(error)
                raise
        with pytest.raises(pickle.PicklingError, match=r"batch\.lock \(lock\) cannot be pickled"):
            next(iter(loader))
        with pytest.raises(RuntimeError, match="loader worker 0 exited with code 3"):
            list(loader)
        # a fresh pool (whose scripted transform starts again), not the dead one's pipes
        with pytest.raises(ValueError, match="transform failed in the worker"):
            list(loader)

    bounded(scenario)


def test_a_killed_worker_is_named_and_the_next_epoch_starts_fresh_workers(no_leaks):
    def scenario() -> None:
        data = ring_data()
        loader = NeighborLoader(data, [3], batch_size=50, shuffle=True, seed=5, prefetch=3, worker_processes=1)
        thread = NeighborLoader(data, [3], batch_size=50, shuffle=True, seed=5)
        before = children()
        epoch = iter(loader)
        next(epoch)
        (worker,) = children() - before
        threading.Event().wait(1.0)  # the worker sends the batches in flight, whose shared memory it holds
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(RuntimeError, match="loader worker 0 exited with code -9"):
            list(epoch)
        assert next(epoch, None) is None  # that epoch is over, as after any error
        list(thread)
        ours, theirs = list(loader), list(thread)
        assert len(ours) == len(theirs) == 6 and all(same(a, b) for a, b in zip(ours, theirs, strict=True))
        assert worker not in children()

    bounded(scenario)


def test_leaving_an_epoch_early_or_dropping_the_loader_mid_epoch_leaves_nothing_behind(no_leaks):
    def scenario() -> None:
        loader = NeighborLoader(ring_data(), [3], batch_size=20, prefetch=4, seed=0, worker_processes=2)
        thread = NeighborLoader(ring_data(), [3], batch_size=20, prefetch=4, seed=0)
        for ours in loader:  # noqa: B007 - left after its first batch
            break
        for theirs in thread:  # noqa: B007
            break
        assert same(ours, theirs)
        assert all(same(a, b) for a, b in zip(loader, thread, strict=True))  # the next epoch is whole
        epoch = iter(loader)
        next(epoch)
        # returning drops the loader mid-epoch: its pool goes with it

    bounded(scenario)


def test_a_loader_that_does_not_pickle_is_refused_by_name(no_leaks):
    def scenario() -> None:
        loader = LinkNeighborLoader(ring_data(), [2], batch_size=50, transform=lambda b: b, worker_processes=1)
        next(iter(loader))

    with pytest.raises(RuntimeError, match="cannot be sent to its worker processes.*transform"):
        bounded(scenario)


class Pair(NamedTuple):
    first: Any
    second: Any


@dataclasses.dataclass
class Holder:
    values: torch.Tensor
    parts: Pair


def test_a_batch_that_does_not_pickle_is_named_by_its_innermost_field():
    batch = Holder(torch.zeros(3), Pair([1, 2], {"tensor": torch.ones(2), ("a", "b"): [0, threading.Lock()]}))
    with pytest.raises(pickle.PicklingError, match=r"batch\.parts\.second\[\('a', 'b'\)\]\[1\] \(lock\)"):
        _pickled_batch(batch)
    data = Data(x=torch.zeros(2, 1))
    data.sampler = lambda: None
    with pytest.raises(pickle.PicklingError, match=r"batch\.sampler \(function\) cannot be pickled"):
        _pickled_batch(data)
    assert torch.equal(ForkingPickler.loads(_pickled_batch(Holder(torch.ones(2), Pair(1, 2)))).values, torch.ones(2))


def test_worker_processes_must_be_a_count():
    with pytest.raises(ValueError, match="worker_processes"):
        NeighborLoader(ring(), [2], batch_size=8, worker_processes=-1)
