"""What both loaders share: epochs that cover the seeds once each, reproducible batches from a seed whatever the
prefetching, the full graph's formats built once, and bad arguments named."""

from __future__ import annotations

import pytest
import torch

import featgraph.graph.graph as graph_module
from featgraph import datasets
from featgraph.loader import BlockLoader, NeighborLoader


@pytest.fixture(scope="module")
def cora() -> datasets.Dataset:
    return datasets.load("cora")


def epoch_ids(loader) -> list[tuple[torch.Tensor, ...]]:
    """What identifies each batch of one epoch: its seeds' positions, sampled vertices and edges."""
    if isinstance(loader, BlockLoader):
        return [(b.input_id, b.input_nodes, *[block.e_id for block in b.blocks]) for b in loader]
    return [(b.input_id, b.n_id, b.e_id) for b in loader]


def same(a: list[tuple[torch.Tensor, ...]], b: list[tuple[torch.Tensor, ...]]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(p, q) for p, q in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("drop_last, sizes", [(False, [50, 50, 40]), (True, [50, 50])])
def test_an_epoch_takes_each_seed_once(cora, drop_last, sizes):
    loader = NeighborLoader(cora, [3], batch_size=50, input_nodes=cora.train_idx, drop_last=drop_last, seed=0)
    positions = [b.input_id for b in loader]
    assert len(loader) == len(sizes) and [p.numel() for p in positions] == sizes
    assert torch.unique(torch.cat(positions)).numel() == sum(sizes)
    unshuffled = NeighborLoader(cora, [3], batch_size=50, input_nodes=cora.train_idx, shuffle=False, seed=0)
    assert torch.equal(torch.cat([b.input_id for b in unshuffled]), torch.arange(140))


@pytest.mark.parametrize("loader_class", [NeighborLoader, BlockLoader])
def test_the_same_seed_gives_the_same_batches_whatever_the_prefetching_and_threads(cora, loader_class):
    def loader(seed: int, prefetch: int, num_workers: int):
        return loader_class(
            cora, [5, 3], batch_size=40, input_nodes=cora.val_idx, seed=seed, prefetch=prefetch, num_workers=num_workers
        )

    reference, other = loader(7, 0, 1), loader(7, 3, 2)
    first, second = epoch_ids(reference), epoch_ids(reference)
    assert same(first, epoch_ids(other)) and same(second, epoch_ids(other))
    assert not same(first, second)  # each epoch its own shuffle and draws
    assert not same(first, epoch_ids(loader(8, 0, 1)))


def test_without_a_seed_torch_s_generator_reproduces_the_batches(cora):
    loader = NeighborLoader(cora, [4], batch_size=100, input_nodes=cora.test_idx)
    torch.manual_seed(3)
    first = epoch_ids(loader)
    torch.manual_seed(3)
    assert same(first, epoch_ids(loader))


def test_the_full_graph_s_formats_are_built_with_the_loader_not_per_batch(cora, monkeypatch):
    loader = NeighborLoader(datasets.load("cora"), [5, 5], batch_size=64, seed=0)
    built = []
    compress = graph_module.compress
    monkeypatch.setattr(graph_module, "compress", lambda *args, **kwargs: built.append(1) or compress(*args, **kwargs))
    assert len(list(loader)) == 43 and built == []


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"shuffle": 1}, TypeError, "shuffle must be a bool"),
        ({"drop_last": None}, TypeError, "drop_last must be a bool"),
        ({"replace": "no"}, TypeError, "replace must be a bool"),
        ({"seed": -1}, ValueError, "seed must be an int from 0"),
        ({"prefetch": -1}, ValueError, "prefetch must be an int >= 0"),
        ({"num_workers": -2}, ValueError, "num_workers must be an int >= 0"),
        ({"num_workers": 5000}, ValueError, "num_workers must be an integer from 1 to 4096"),
        ({"input_nodes": torch.tensor([5000])}, ValueError, "input_nodes holds vertex id 5000, out of range"),
    ],
)
def test_bad_arguments_are_named(cora, kwargs, error, message):
    with pytest.raises(error, match=message):
        NeighborLoader(cora, [5], **kwargs)


@pytest.mark.parametrize("loader_class", [NeighborLoader, BlockLoader])
def test_calling_a_loader_with_positions_gives_the_batch_of_those_inputs(cora, loader_class):
    loader = loader_class(cora, [3], batch_size=8, input_nodes=cora.val_idx, seed=0)
    batch = loader([4, 0, 9])
    assert torch.equal(batch.input_id, torch.tensor([4, 0, 9]))
    seeds = batch.n_id[: batch.batch_size] if loader_class is NeighborLoader else batch.seeds
    assert torch.equal(seeds, cora.val_idx[[4, 0, 9]])
    assert repr(loader) == f"{loader_class.__name__}()"


@pytest.mark.parametrize(
    "index, message",
    [([], "index is empty"), ([[0]], "index must be a 1-D list"), ([0.5], "index must be"), ([500], "out of range")],
)
def test_bad_positions_to_a_call_are_named(cora, index, message):
    with pytest.raises(ValueError, match=message):
        NeighborLoader(cora, [3], input_nodes=cora.val_idx)(index)
