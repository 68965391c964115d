"""layerwise_inference equals the full-graph forward: dense torch layers (aggregation by a dense adjacency) and
PyG layers, any chunk size; its progress bar; bad input."""

from __future__ import annotations

import io

import pytest
import torch

from featgraph import Graph, datasets
from featgraph.loader import layerwise_inference
from tests.conftest import random_edges
from tests.loader.reference import sage_forward


def dense_mean(num_dst: int, num_src: int, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """The row-normalised dense adjacency: row v averages v's in-neighbours (duplicates counted)."""
    adjacency = torch.zeros(num_dst, num_src, dtype=torch.float64)
    adjacency.index_put_((dst, src), torch.ones(src.numel(), dtype=torch.float64), accumulate=True)
    return adjacency / adjacency.sum(1, keepdim=True).clamp(min=1)


@pytest.mark.parametrize("batch_size", [1, 37, 500])
def test_dense_layers_equal_the_full_graph_forward(batch_size):
    num_nodes = 200
    src, dst = random_edges(num_nodes, 1500, seed=3)
    graph = Graph(src, dst, num_nodes)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(num_nodes, 6, dtype=torch.float64, generator=gen)
    weights = [
        torch.randn(6, 5, dtype=torch.float64, generator=gen),
        torch.randn(5, 3, dtype=torch.float64, generator=gen),
    ]

    def step(weight: torch.Tensor, last: bool):
        def run(h: torch.Tensor, block) -> torch.Tensor:
            block_src, block_dst = block.graph.coo()
            mean = dense_mean(block.graph.num_dst_nodes, block.graph.num_src_nodes, block_src, block_dst)
            out = (mean @ h + h[: block.graph.num_dst_nodes]) @ weight
            return out if last else out.tanh()

        return run

    out = layerwise_inference([step(weights[0], False), step(weights[1], True)], graph, x, batch_size, progress=False)
    mean = dense_mean(num_nodes, num_nodes, src, dst)
    expected = ((mean @ ((mean @ x + x) @ weights[0]).tanh()) + ((mean @ x + x) @ weights[0]).tanh()) @ weights[1]
    torch.testing.assert_close(out, expected)


def test_pyg_layers_equal_the_full_graph_forward_and_the_bar_counts_chunks_of_every_layer():
    from torch_geometric.nn import SAGEConv

    cora = datasets.load("cora")
    torch.manual_seed(0)
    convs = torch.nn.ModuleList([SAGEConv(cora.features.shape[1], 16), SAGEConv(16, 7)]).eval()
    with torch.no_grad():
        full = sage_forward(convs, cora.features, cora.edge_index)

    def layer(conv, last: bool):  # PyG's own inference form: every source row in, the destinations' rows used
        def run(h: torch.Tensor, block) -> torch.Tensor:
            h = conv(h, torch.stack(block.graph.coo()))
            return h if last else h.relu()

        return run

    stream = io.StringIO()
    import featgraph.loader.inference as inference

    original = inference.Progress
    inference.Progress = lambda *args, **kwargs: original(*args, stream=stream, **kwargs)
    try:
        out = layerwise_inference([layer(convs[0], False), layer(convs[1], True)], cora.graph, cora.features, 1000)
    finally:
        inference.Progress = original
    torch.testing.assert_close(out, full, rtol=1e-5, atol=1e-5)
    assert not out.requires_grad
    assert stream.getvalue().splitlines()[-1].startswith("inference [########################] 6/6 layer 2/2")


def test_bad_input_is_named():
    graph = Graph(torch.tensor([0, 1]), torch.tensor([1, 2]), 3)
    identity = [lambda h, block: h]
    with pytest.raises(ValueError, match=r"x must be a tensor with one row per vertex \(3\), got \(4, 2\)"):
        layerwise_inference(identity, graph, torch.zeros(4, 2), progress=False)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        layerwise_inference(identity, graph, torch.zeros(3, 2), batch_size=0, progress=False)
    with pytest.raises(ValueError, match="layers must be a non-empty sequence"):
        layerwise_inference([], graph, torch.zeros(3, 2), progress=False)
    with pytest.raises(TypeError, match=r"layers\[1\] must be callable"):
        layerwise_inference([identity[0], 3], graph, torch.zeros(3, 2), progress=False)
    with pytest.raises(ValueError, match=r"layers\[0\] returned \(1, 2\) for a block of 2 destinations"):
        layerwise_inference([lambda h, block: h[:1]], graph, torch.zeros(3, 2), batch_size=2, progress=False)
    with pytest.raises(ValueError, match="graph is bipartite"):
        layerwise_inference(identity, Graph(torch.tensor([0]), torch.tensor([0]), (2, 1)), torch.zeros(2, 2))


def test_storage_dtype_keeps_hidden_rows_rounded_and_computes_in_the_input_dtype():
    """With bfloat16 storage each layer sees the previous layer's rows rounded to bfloat16 and computes in x's
    dtype; the last layer's rows come back in their own dtype. Reference: the same steps with the rounding
    done by hand."""
    num_nodes = 120
    src, dst = random_edges(num_nodes, 700, seed=5)
    graph = Graph(src, dst, num_nodes)
    x = torch.randn(num_nodes, 4, generator=torch.Generator().manual_seed(1))
    seen_dtypes = []

    def step(last: bool):
        def run(h: torch.Tensor, block) -> torch.Tensor:
            seen_dtypes.append(h.dtype)
            block_src, block_dst = block.graph.coo()
            mean = dense_mean(block.graph.num_dst_nodes, block.graph.num_src_nodes, block_src, block_dst).float()
            out = mean @ h * 1.001  # a factor bfloat16 cannot hold exactly
            return out if last else out.tanh()

        return run

    out = layerwise_inference([step(False), step(True)], graph, x, 50, progress=False, storage_dtype=torch.bfloat16)
    assert out.dtype == torch.float32 and set(seen_dtypes) == {torch.float32}
    mean = dense_mean(num_nodes, num_nodes, src, dst).float()
    hidden = (mean @ x * 1.001).tanh().to(torch.bfloat16).float()
    torch.testing.assert_close(out, mean @ hidden * 1.001)
    exact = layerwise_inference([step(False), step(True)], graph, x, 50, progress=False)
    assert not torch.equal(out, exact)
    with pytest.raises(ValueError, match="storage_dtype must be a floating torch.dtype"):
        layerwise_inference([step(True)], graph, x, progress=False, storage_dtype=torch.int8)
