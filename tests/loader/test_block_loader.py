"""BlockLoader: DGL's (input_nodes, seeds, blocks) shape, blocks that chain layer to layer, features gathered,
and PyG layers run block by block equal to the full-graph forward when every neighbour is kept."""

from __future__ import annotations

import pytest
import torch

from featgraph import datasets
from featgraph.loader import BlockBatch, BlockLoader
from featgraph.sampling import MiniBatch
from tests.loader.reference import sage_forward
from tests.sampling.reference import check_minibatch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.nn import SAGEConv  # noqa: E402


@pytest.fixture(scope="module")
def cora() -> datasets.Dataset:
    return datasets.load("cora")


@pytest.mark.parametrize("fanouts", [[5, 5], [4, -1, 3]], ids=["5-5", "4-all-3"])
def test_batches_unpack_as_dgl_s_and_their_blocks_chain_from_the_input_layer_to_the_seeds(cora, fanouts):
    loader = BlockLoader(cora, fanouts, 64, input_nodes=cora.test_idx, seed=4)
    batches = list(loader)
    assert len(batches) == len(loader) == 16 and all(isinstance(b, BlockBatch) for b in batches)
    for batch in batches:
        input_nodes, seeds, blocks = batch
        assert torch.equal(seeds, cora.test_idx[batch.input_id]) and batch.batch_size == seeds.numel()
        check_minibatch(cora.graph, MiniBatch(blocks, seeds), seeds, fanouts)
        assert torch.equal(input_nodes, blocks[0].n_id)
        # each layer computes exactly the rows the next one reads
        for inner, outer in zip(blocks, blocks[1:], strict=False):
            assert inner.graph.num_dst_nodes == outer.graph.num_src_nodes
            assert torch.equal(inner.n_id[: inner.graph.num_dst_nodes], outer.n_id)
        assert blocks[-1].graph.num_dst_nodes == seeds.numel()
        assert torch.equal(batch.x, cora.features[input_nodes]) and torch.equal(batch.y, cora.labels[seeds])
    seeds = torch.cat([b.seeds for b in batches])
    assert torch.equal(torch.sort(seeds).values, torch.sort(cora.test_idx).values)


def test_without_features_a_batch_carries_ids_and_blocks(cora):
    batch = next(iter(BlockLoader(cora.graph, [3], 10, seed=0)))
    assert batch.x is None and batch.y is None and len(batch.blocks) == 1


def test_pyg_layers_on_full_neighbourhood_blocks_equal_the_full_graph_forward(cora):
    torch.manual_seed(0)
    convs = torch.nn.ModuleList([SAGEConv(cora.features.shape[1], 16), SAGEConv(16, 7)]).eval()
    with torch.no_grad():
        full = sage_forward(convs, cora.features, cora.edge_index)
        data = Data(x=cora.features, edge_index=cora.edge_index)
        for input_nodes, seeds, blocks in BlockLoader(data, [-1, -1], 700, seed=1):
            h = cora.features[input_nodes]
            for depth, (block, conv) in enumerate(zip(blocks, convs, strict=True)):
                sizes = (block.graph.num_src_nodes, block.graph.num_dst_nodes)
                h = conv((h, h[: sizes[1]]), torch.stack(block.graph.coo()), size=sizes)
                if depth < len(convs) - 1:
                    h = h.relu()
            torch.testing.assert_close(h, full[seeds], rtol=1e-5, atol=1e-5)


def test_self_loops_blocks_come_with_their_looped_graph_built(cora):
    loader = BlockLoader(cora, [4, 3], 32, seed=0, self_loops=True)
    plain = BlockLoader(cora, [4, 3], 32, seed=0)
    for batch, same in zip(loader, plain, strict=True):
        for block, other in zip(batch.blocks, same.blocks, strict=True):
            assert ("with_self_loops", 1.0) in block.graph._cache and ("with_self_loops", 1.0) not in other.graph._cache
            assert torch.equal(block.graph.with_self_loops().edge_index, other.graph.with_self_loops().edge_index)
    with pytest.raises(TypeError, match="self_loops must be a bool"):
        BlockLoader(cora, [4], 32, self_loops=1)


def test_bad_fanouts_are_named(cora):
    with pytest.raises(ValueError, match=r"fanouts must hold ints from 0 to 2\*\*31 - 1 or -1"):
        BlockLoader(cora, [5, -3], 10)
    with pytest.raises(ValueError, match="input_nodes is empty"):
        BlockLoader(cora, [5], 10, input_nodes=torch.tensor([], dtype=torch.int64))


def test_a_batch_moves_every_tensor_and_block_to_a_device(cora):
    """``BlockBatch.to`` as PyG's ``Data.to`` (the meta device stands in for a GPU here)."""
    batch = next(iter(BlockLoader(cora, [4, 3], 32, seed=0)))
    moved = batch.to("meta")
    for name in ("input_nodes", "seeds", "input_id", "x", "y"):
        there, here = getattr(moved, name), getattr(batch, name)
        assert there.device.type == "meta" and there.shape == here.shape
    for block, original in zip(moved.blocks, batch.blocks, strict=True):
        assert block.graph.device.type == block.n_id.device.type == block.e_id.device.type == "meta"
        sizes = (original.graph.num_src_nodes, original.graph.num_edges)
        assert (block.graph.num_src_nodes, block.graph.num_edges) == sizes
    assert batch.x.device.type == "cpu"  # the batch itself is left as it was


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the warning on a machine without a GPU")
def test_pin_memory_without_a_gpu_warns_and_leaves_batches_as_they_are(cora):
    with pytest.warns(UserWarning, match="pin_memory=True: no CUDA GPU"):
        loader = BlockLoader(cora, [4, 3], 32, seed=0, pin_memory=True)
    reference = next(iter(BlockLoader(cora, [4, 3], 32, seed=0)))
    assert torch.equal(next(iter(loader)).x, reference.x)


def test_pinned_batches_copy_to_the_gpu_without_blocking(cora, cuda):
    loader = BlockLoader(cora, [4, 3], 32, seed=0, pin_memory=True)
    batch = next(iter(loader))
    assert batch.x.is_pinned() and all(block.n_id.is_pinned() for block in batch.blocks)
    on_gpu = batch.to(cuda, non_blocking=True)
    reference = next(iter(BlockLoader(cora, [4, 3], 32, seed=0)))
    assert torch.equal(on_gpu.x.cpu(), reference.x) and on_gpu.blocks[0].graph.device == cuda


def test_batches_move_every_field_tensors_dicts_lists_and_blocks():
    """``MovableBatch.to`` moves each field by kind (checked with a recording move, as a GPU is not at hand)."""
    from featgraph.loader.block_loader import MovableBatch

    cora_small = datasets.load("cora")
    batch = next(iter(BlockLoader(cora_small, [3], 16, seed=0)))
    seen = []
    moved = batch._moved(lambda t: seen.append(t.shape) or t + 0, lambda g: ("moved", g))
    assert isinstance(moved, MovableBatch) and torch.equal(moved.x, batch.x) and moved.x is not batch.x
    assert all(isinstance(b, tuple) and b[0] == "moved" for b in moved.blocks)
    assert len(seen) == 5  # input_nodes, seeds, input_id, x, y
    cpu = batch.to("cpu")
    assert torch.equal(cpu.seeds, batch.seeds) and torch.equal(
        cpu.blocks[0].graph.edge_index, batch.blocks[0].graph.edge_index
    )
