"""BlockLoader: DGL's (input_nodes, seeds, blocks) shape, blocks that chain layer to layer, features gathered,
and PyG layers run block by block equal to the full-graph forward when every neighbour is kept."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph, datasets
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


def test_pinned_batches_gather_their_features_into_page_locked_memory(cora, cuda, monkeypatch):
    """The features are gathered straight into pinned memory: pinning the batch copies only the rest (the
    single-threaded copy of a batch's largest tensor is what ``pin_memory`` would otherwise add per batch)."""
    copied = []
    original = torch.Tensor.pin_memory

    def recording(tensor, *args, **kwargs):
        if not tensor.is_pinned():
            copied.append(tuple(tensor.shape))
        return original(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "pin_memory", recording)
    batch = next(iter(BlockLoader(cora, [4, 3], 32, seed=0, pin_memory=True, prefetch=0)))
    reference = next(iter(BlockLoader(cora, [4, 3], 32, seed=0)))
    assert batch.x.is_pinned() and torch.equal(batch.x, reference.x) and torch.equal(batch.y, reference.y)
    assert copied and all(shape[1:] != batch.x.shape[1:] for shape in copied)
    assert not cora.features.is_pinned()  # the caller's features are left as they were


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


def small_graph(data: st.DataObject) -> Graph:
    num_nodes = data.draw(st.integers(1, 10), label="num_nodes")
    edges = data.draw(st.lists(st.tuples(st.integers(0, num_nodes - 1), st.integers(0, num_nodes - 1)), max_size=40))
    return Graph(
        torch.tensor([u for u, _ in edges], dtype=torch.int64),
        torch.tensor([v for _, v in edges], dtype=torch.int64),
        num_nodes,
    )


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    fanout=st.sampled_from([-1, 1, 2]),
    replace=st.booleans(),
    idtype=st.sampled_from([torch.int32, torch.int64]),
)
def test_property_a_bool_edge_attr_is_a_sampling_mask_and_ids_keep_the_idtype(data, fanout, replace, idtype):
    """Edges marked False are never drawn; with every neighbour kept, a seed's block holds exactly its marked
    in-edges (the reference: the graph's edges filtered by the mask); every id is of ``idtype``."""
    graph = small_graph(data)
    mask = torch.tensor(
        data.draw(st.lists(st.booleans(), min_size=graph.num_edges, max_size=graph.num_edges)), dtype=torch.bool
    )
    loader = BlockLoader(
        graph, [fanout], 3, weight_attr="keep", edge_attrs={"keep": mask}, replace=replace and fanout > 0, idtype=idtype
    )
    src, dst = graph.coo()
    for input_nodes, seeds, [block] in loader:
        assert input_nodes.dtype == seeds.dtype == block.n_id.dtype == block.e_id.dtype == idtype
        drawn = block.e_id.long()
        assert bool(mask[drawn].all()) and torch.equal(block.n_id[block.edges()[1]].long(), dst[drawn])
        if fanout == -1:
            marked = mask & torch.isin(dst, seeds.long())
            assert sorted(drawn.tolist()) == marked.nonzero().flatten().tolist()


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"idtype": torch.float32}, ValueError, "idtype must be torch.int32 or torch.int64"),
        ({"idtype": "int32"}, ValueError, "idtype must be torch.int32 or torch.int64"),
        ({"edge_attrs": [1, 2]}, TypeError, "edge_attrs must be a dict name -> per-edge tensor"),
        ({"edge_attrs": {"w": torch.ones(3)}}, ValueError, r"w must have one row per edge \(7\), got shape \(3,\)"),
        ({"weight_attr": "w"}, ValueError, "weight_attr 'w' names no per-edge tensor"),
        (
            {"edge_attrs": {"w": torch.ones(7)}, "data": "cora"},
            TypeError,
            "passed only with a featgraph Graph, edge_attrs too",
        ),
    ],
)
def test_bad_dgl_options_are_named(cora, arguments, error, message):
    data = (
        cora
        if arguments.pop("data", None)
        else Graph(torch.tensor([0, 1, 2, 3, 4, 5, 0]), torch.tensor([1, 2, 3, 4, 5, 0, 2]), 6)
    )
    with pytest.raises(error, match=message):
        BlockLoader(data, [2], **arguments)


def test_int32_ids_do_not_outgrow_their_type():
    graph = Graph(torch.tensor([0]), torch.tensor([1]), 2**31 + 1)
    with pytest.raises(ValueError, match=r"idtype torch.int32: the graph has 2147483649 vertices"):
        BlockLoader(graph, [2], idtype=torch.int32, input_nodes=torch.tensor([0]))
