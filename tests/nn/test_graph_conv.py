import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn.graph_conv import GraphConv
from tests.nn.reference import (
    NUM_DST,
    NUM_SRC,
    REDUCE,
    N,
    assert_matches_pyg,
    assert_same_as_pyg,
    bipartite_edges,
    edges,
    expect_fallback,
    per_vertex,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")


def dense_graph_conv(conv, x_src, x_dst, edge_index, weight, reduce):
    """``lin_root(x_dst) + lin_rel(reduce_u w_e x_u)`` by a loop over destinations."""
    src = edge_index[0]
    messages = per_vertex(
        edge_index,
        x_dst.shape[0],
        x_src.shape[1],
        lambda v, into: REDUCE[reduce](weight[into, None] * x_src[src[into]]),
    )
    return conv.lin_rel(messages) + conv.lin_root(x_dst)


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("channels", [(7, 5), (5, 9)], ids=["narrowing", "widening"])
def test_graph_conv_against_a_loop_and_gradcheck(aggr, channels):
    torch.manual_seed(0)
    conv = GraphConv(*channels, aggr=aggr).double()
    edge_index = edges(1)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) + 0.5
    x = torch.randn(N, channels[0], dtype=torch.float64, requires_grad=True)
    reduce = {"add": "sum", "mean": "mean", "max": "max"}[aggr]
    torch.testing.assert_close(conv(x, edge_index, weight), dense_graph_conv(conv, x, x, edge_index, weight, reduce))
    assert gradcheck(lambda x, w: conv(x, edge_index, w), (x, weight.requires_grad_()), fast_mode=True)


@pytest.mark.parametrize("aggr", ["add", "mean", "max", "min"])
@pytest.mark.parametrize("weighted", [False, True])
def test_graph_conv_matches_pyg(aggr, weighted):
    torch.manual_seed(1)
    edge_index = edges(2)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) if weighted else None
    theirs = pyg_nn.GraphConv(9, 6, aggr=aggr)
    assert_matches_pyg(GraphConv(9, 6, aggr=aggr), theirs, torch.randn(N, 9), edge_index, weight)


def test_graph_conv_sparse_adjacency_and_graph_carry_their_weights():
    torch.manual_seed(2)
    edge_index = edges(3)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64)
    conv = GraphConv(4, 3).double()
    x = torch.randn(N, 4, dtype=torch.float64)
    want = pyg_nn.GraphConv(4, 3).double()
    want.load_state_dict(conv.state_dict())
    ref = want(x, edge_index, weight)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), weight, (N, N)).to_sparse_csr()
    torch.testing.assert_close(conv(x, adj_t), ref)
    torch.testing.assert_close(conv(x, fg.Graph.from_edge_index(edge_index, N, edge_weight=weight)), ref)


@pytest.mark.parametrize("x_dst", ["given", "none"])
def test_graph_conv_bipartite_as_pyg(x_dst):
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    dst = torch.randn(NUM_DST, 3, dtype=torch.float64, requires_grad=True) if x_dst == "given" else None
    torch.manual_seed(3)
    theirs = pyg_nn.GraphConv((5, 3), 4)
    inputs = (x_src,) if dst is None else (x_src, dst)
    size = (NUM_SRC, NUM_DST)
    assert_same_as_pyg(GraphConv((5, 3), 4), theirs, inputs, (x_src, dst), edge_index, size=size)
    block = fg.Graph.from_edge_index(edge_index, size=size)  # a block: destinations lead the sources
    ours = GraphConv(5, 4).double()
    x = x_src.detach()
    want = pyg_nn.GraphConv(5, 4).double()
    want.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(x, block), want((x, x[:NUM_DST]), edge_index, size=size))


def test_graph_conv_falls_back_to_pyg_with_a_warning():
    torch.manual_seed(4)
    theirs = pyg_nn.GraphConv(4, 3, aggr="mul")
    ours = GraphConv(4, 3, aggr="mul")
    with expect_fallback("aggr='mul'"):
        assert_matches_pyg(ours, theirs, torch.randn(N, 4), edges(4))


def test_graph_conv_is_pyg_s_layer():
    conv = GraphConv((8, 16), 32)
    assert isinstance(conv, pyg_nn.GraphConv)
    assert str(conv) == "GraphConv((8, 16), 32)"
    assert conv.state_dict().keys() == pyg_nn.GraphConv((8, 16), 32).state_dict().keys()
