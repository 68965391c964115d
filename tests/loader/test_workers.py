"""Loaders with worker processes against the same loaders' background thread: the same batches in the same
order, a memory-mapped array sent as its file, a worker's exception and a worker's death raised in the parent,
and bad input named."""

from __future__ import annotations

import os
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch

from featgraph import Graph
from featgraph.loader import BlockLoader, NeighborLoader

torch_geometric = pytest.importorskip("torch_geometric")


def ring(n: int = 300) -> Graph:
    src = torch.arange(n)
    return Graph(torch.cat([src, src]), torch.cat([(src + 1) % n, (src + 7) % n]), n)


def fails(batch):  # a transform that raises in the worker
    raise ValueError("transform failed in the worker")


def exits(batch):  # a transform that kills its worker
    os._exit(3)


def test_worker_processes_give_the_threads_batches_from_a_memory_mapped_array(tmp_path):
    features = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32, shape=(300, 5))
    features[:] = np.random.default_rng(0).standard_normal((300, 5))
    features.flush()
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    from torch_geometric.data import Data

    data = Data(x=mapped, edge_index=torch.stack(ring().coo()), num_nodes=300)  # PyG keeps the memmap as it is
    thread = NeighborLoader(data, [3, 2], batch_size=64, shuffle=True, seed=1)
    workers = NeighborLoader(data, [3, 2], batch_size=64, shuffle=True, seed=1, worker_processes=2)
    for _ in range(2):  # the pool outlives an epoch
        ours, theirs = list(workers), list(thread)
        assert len(ours) == len(theirs) == 5
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
            assert torch.equal(a.x, b.x) and torch.equal(a.x, torch.from_numpy(features[a.n_id.numpy()]))
    # the pool, once started, sends a memory-mapped array as its file
    again = ForkingPickler.loads(ForkingPickler.dumps(mapped))
    assert isinstance(again, np.memmap) and again.filename == mapped.filename and np.array_equal(again, mapped)
    blocks = BlockLoader(ring(), [2], 100, seed=0, worker_processes=1)
    assert [b.seeds.tolist() for b in blocks] == [b.seeds.tolist() for b in BlockLoader(ring(), [2], 100, seed=0)]


def test_a_workers_exception_or_death_is_raised_here():
    x = torch.randn(300, 4)
    from torch_geometric.data import Data

    data = Data(x=x, edge_index=torch.stack(ring().coo()))
    from featgraph.loader import LinkNeighborLoader

    failing = LinkNeighborLoader(data, [2], batch_size=50, transform=fails, worker_processes=1)
    with pytest.raises(ValueError, match="transform failed in the worker"):
        list(failing)
    dying = LinkNeighborLoader(data, [2], batch_size=50, transform=exits, worker_processes=1)
    with pytest.raises(RuntimeError, match="a loader worker exited with code 3"):
        list(dying)


def test_worker_processes_must_be_a_count():
    with pytest.raises(ValueError, match="worker_processes"):
        NeighborLoader(ring(), [2], batch_size=8, worker_processes=-1)
