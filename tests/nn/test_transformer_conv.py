import math

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn.transformer_conv import TransformerConv
from tests.nn.reference import (
    NUM_DST,
    NUM_SRC,
    N,
    assert_matches_pyg,
    assert_same_as_pyg,
    bipartite_edges,
    edges,
    expect_fallback,
    per_vertex,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")


def pair(*args, **kwargs):
    """Featgraph's and PyG's TransformerConv with the same weights."""
    torch.manual_seed(0)
    theirs = pyg_nn.TransformerConv(*args, **kwargs)
    ours = TransformerConv(*args, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def per_vertex_transformer(conv, x, edge_index, edge_attr):
    """Attention by a loop over destinations: softmax_u(q_v . (k_u + W e) / sqrt(C)) (v_u + W e), + lin_skip."""
    heads, channels = conv.heads, conv.out_channels
    q, k, v = (lin(x).view(N, heads, channels) for lin in (conv.lin_query, conv.lin_key, conv.lin_value))
    e = conv.lin_edge(edge_attr).view(-1, heads, channels)
    src, dst = edge_index

    def attend(t, into):
        keys, values = k[src[into]] + e[into], v[src[into]] + e[into]
        alpha = torch.softmax((q[t] * keys).sum(-1) / math.sqrt(channels), 0)
        return (alpha.unsqueeze(-1) * values).sum(0).flatten()

    return per_vertex(edge_index, N, heads * channels, attend) + conv.lin_skip(x)


def test_transformer_conv_against_a_loop_and_gradcheck():
    ours, _ = pair(5, 3, heads=2, edge_dim=2)
    ours.double()
    edge_index = edges(1)
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(edge_index.shape[1], 2, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(ours(x, edge_index, edge_attr), per_vertex_transformer(ours, x, edge_index, edge_attr))
    assert gradcheck(lambda x, e: ours(x, edge_index, e), (x, edge_attr), fast_mode=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"heads": 3},
        {"heads": 2, "concat": False, "beta": True},
        {"heads": 2, "root_weight": False, "bias": False},
        {"heads": 1, "beta": True, "edge_dim": 3},
    ],
    ids=lambda k: "-".join(f"{n}={v}" for n, v in k.items()),
)
def test_transformer_conv_matches_pyg(kwargs):
    ours, theirs = pair(7, 5, **kwargs)
    edge_index = edges(2)
    x = torch.randn(N, 7, dtype=torch.float64, requires_grad=True)
    if "edge_dim" not in kwargs:
        assert_matches_pyg(ours, theirs, x, edge_index)
        return
    edge_attr = torch.randn(edge_index.shape[1], 3, dtype=torch.float64, requires_grad=True)
    assert_same_as_pyg(ours, theirs, (x, edge_attr), x, edge_index, edge_attr)
    graph = fg.Graph.from_edge_index(edge_index, N)
    torch.testing.assert_close(ours(x, graph, edge_attr), theirs(x, edge_index, edge_attr))


def test_transformer_conv_bipartite_as_pyg():
    ours, theirs = pair((5, 4), 3, heads=2, beta=True, edge_dim=2)
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(NUM_DST, 4, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(edge_index.shape[1], 2, dtype=torch.float64)
    assert_same_as_pyg(ours, theirs, (x_src, x_dst), (x_src, x_dst), edge_index, edge_attr)
    with pytest.raises(ValueError, match="x: TransformerConv needs the destinations' features"):
        ours((x_src, None), edge_index, edge_attr)


def test_transformer_conv_attention_weights_and_dropout_as_pyg():
    ours, theirs = pair(8, 4, heads=2, dropout=0.4, edge_dim=3)
    x, edge_index = torch.randn(N, 8), edges(4)
    edge_attr = torch.randn(edge_index.shape[1], 3)
    results = []
    for conv in (ours, theirs):
        torch.manual_seed(7)  # the same draws: F.dropout on the same (E, heads) weights
        results.append(conv(x, edge_index, edge_attr, return_attention_weights=True))
    (out, (index, alpha)), (ref, (ref_index, ref_alpha)) = results
    torch.testing.assert_close(out, ref)
    assert torch.equal(index, ref_index)
    torch.testing.assert_close(alpha, ref_alpha)  # PyG returns the weights before dropout
    assert ours._alpha is None


def test_transformer_conv_sparse_adjacency_and_fallback():
    ours, theirs = pair(4, 3, heads=2)
    x, edge_index = torch.randn(N, 4), edges(5)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.shape[1]), (N, N)).coalesce()
    adj_t = adj_t.to_sparse_csr()
    torch.testing.assert_close(ours(x, adj_t), theirs(x, adj_t))
    with expect_fallback("attention weights of a sparse adj_t"):
        out, (adj, alpha) = ours(x, adj_t, return_attention_weights=True)
    torch.testing.assert_close(out, theirs(x, adj_t))
    with pytest.raises(ValueError, match="edge_attr: given to a TransformerConv without edge_dim"):
        ours(x, edge_index, torch.randn(edge_index.shape[1], 2))
    assert str(ours) == str(theirs)
