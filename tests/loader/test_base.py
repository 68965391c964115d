"""What both loaders share: epochs that cover the seeds once each, reproducible batches from a seed whatever the
prefetching, the full graph's formats built once, and bad arguments named."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import featgraph.graph.graph as graph_module
from featgraph import datasets
from featgraph.graph.interop import import_dgl
from featgraph.loader import BlockLoader, NeighborLoader
from featgraph.loader.base import ddp_share, gathered


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


def ranked(monkeypatch: pytest.MonkeyPatch, rank: int, world: int) -> None:
    """torch.distributed as seen by rank ``rank`` of ``world`` (no process group is started)."""
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: rank)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: world)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(1, 40), world=st.integers(1, 6), drop_last=st.booleans(), data=st.data())
def test_property_ddp_shares_are_dgls(monkeypatch, count, world, drop_last, data):
    """Each rank's share of the inputs is the one DGL's DDP dataset gives it: its own slice of the inputs, padded
    (without drop_last) with its own first inputs where DGL pads it with them."""
    if import_dgl() is None:
        pytest.skip("DGL does not import here")
    from dgl.dataloading.dataloader import DDPTensorizedDataset

    rank = data.draw(st.integers(0, world - 1))
    ranked(monkeypatch, rank, world)
    inputs = torch.randperm(count) + 100
    size = count // world if drop_last else -(-count // world)
    if rank * size >= count and size:  # DGL fails here (a negative count of its own ids), featgraph names it
        with pytest.raises(ValueError, match=f"leave rank {rank} of {world} none"):
            ddp_share(inputs, drop_last)
        return
    share = ddp_share(inputs, drop_last)
    theirs = DDPTensorizedDataset(inputs, 4, drop_last, 0, False)
    own = theirs.local_num_indices
    assert share.numel() == len(theirs._indices) == size
    assert torch.equal(share[:own], theirs._id_tensor[:own])
    if size - own <= own:  # DGL pads from its own ids only so far; past them it reads memory it never wrote
        assert torch.equal(share, theirs._id_tensor[theirs._indices])
    assert torch.equal(share[own:], share[torch.arange(size - own) % own] if own else share[:0])


def test_a_padded_ddp_share_gives_a_batch_each_seed_once(monkeypatch, cora):
    ranked(monkeypatch, 2, 4)  # 5 seeds over 4 ranks: rank 2 takes seed 4, padded with itself
    loader = BlockLoader(cora, [2], batch_size=2, input_nodes=torch.arange(5), use_ddp=True, shuffle=False)
    assert torch.equal(loader.inputs, torch.tensor([4, 4])) and len(loader) == 1
    [batch] = list(loader)
    assert torch.equal(batch.seeds, torch.tensor([4])) and torch.equal(batch.input_id, torch.tensor([0]))


def test_use_ddp_with_one_process_takes_every_seed():
    torch.distributed.init_process_group("gloo", "tcp://127.0.0.1:12391", world_size=1, rank=0)
    try:
        graph = datasets.rmat(6, 4, seed=1)
        loader = BlockLoader(graph, [2], batch_size=16, use_ddp=True, shuffle=True)
        assert torch.equal(torch.cat([b.seeds for b in loader]).sort().values, torch.arange(graph.num_nodes))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.parametrize(
    ("use_ddp", "error", "message"),
    [("yes", TypeError, "use_ddp must be a bool"), (True, ValueError, "use_ddp=True needs torch.distributed")],
)
def test_bad_use_ddp_is_named(cora, use_ddp, error, message):
    with pytest.raises(error, match=message):
        BlockLoader(cora, [2], use_ddp=use_ddp)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(0, 3000),
    width=st.integers(1, 300),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bfloat16, torch.bool]),
    seed=st.integers(0, 2**16),
)
def test_property_gathered_rows_are_index_select_s_and_large_ones_reuse_freed_memory(rows, width, dtype, seed):
    """``gathered`` against ``index_select`` (any row count, width and dtype, repeated and unsorted indices), the
    caller's tensor untouched; gathers go through the output pool: where it keeps requests of a megabyte or more,
    a gather that large takes the memory a dead one left (its pages already mapped)."""
    from featgraph.backends.cpu import buffers

    pool = buffers.POOL
    kept, floor = pool.max_free_bytes, pool.min_bytes
    # a pool that keeps memory from 1 MiB up (by default it keeps none below 32 MiB, and none where huge pages serve)
    pool.max_free_bytes, pool.min_bytes = 64 * 1024**2, 1024**2
    buffers.release()  # no free buffer from an earlier example competes for the request
    try:
        gen = torch.Generator().manual_seed(seed)
        values = (torch.randn(257, width, generator=gen) * 10).to(dtype)
        before = values.clone()
        index = torch.randint(0, 257, (rows,), generator=gen)
        out = gathered(values, index)
        assert out.dtype == dtype and torch.equal(out, values.index_select(0, index)) and torch.equal(values, before)
        pooled = rows * width * dtype.itemsize >= pool.min_bytes
        address = out.data_ptr()
        del out
        again = gathered(values, index)
        assert torch.equal(again, values.index_select(0, index))
        held = [(b.memory.ctypes.data, b.memory.ctypes.data + b.memory.nbytes) for b in pool._buffers]
        assert any(start <= again.data_ptr() < end for start, end in held) == pooled
        assert again.data_ptr() == address or not pooled
    finally:
        pool.max_free_bytes, pool.min_bytes = kept, floor
        buffers.release()
