import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn.gatv2_conv import GATv2Conv
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
    with_self_loops,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")


def pair(*args, **kwargs):
    """Featgraph's and PyG's GATv2Conv with the same weights (a random bias, so it is seen)."""
    torch.manual_seed(0)
    theirs = pyg_nn.GATv2Conv(*args, **kwargs)
    if theirs.bias is not None:
        torch.nn.init.normal_(theirs.bias)
    ours = GATv2Conv(*args, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def per_vertex_gatv2(conv, x, edge_index):
    """GATv2 by a loop over destinations: softmax over in-edges (loops replaced by one per vertex)."""
    heads, channels = conv.heads, conv.out_channels
    xl, xr = conv.lin_l(x).view(N, heads, channels), conv.lin_r(x).view(N, heads, channels)
    src, dst = looped = with_self_loops(edge_index)
    scores = (F.leaky_relu(xl[src] + xr[dst], conv.negative_slope) * conv.att).sum(-1)

    def attend(v, into):
        return (torch.softmax(scores[into], 0).unsqueeze(-1) * xl[src[into]]).sum(0).flatten()

    return per_vertex(looped, N, heads * channels, attend) + conv.bias


def test_gatv2_conv_against_a_loop_and_gradcheck():
    ours, _ = pair(5, 3, heads=2)
    ours.double()
    edge_index = edges(1)
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(ours(x, edge_index), per_vertex_gatv2(ours, x, edge_index))
    assert gradcheck(lambda x: ours(x, edge_index), (x,), fast_mode=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"heads": 3},
        {"heads": 2, "concat": False, "negative_slope": 0.1},
        {"heads": 2, "share_weights": True, "residual": True},
        {"add_self_loops": False, "bias": False},
    ],
    ids=lambda k: "-".join(f"{n}={v}" for n, v in k.items()),
)
def test_gatv2_conv_matches_pyg(kwargs):
    ours, theirs = pair(7, 5, **kwargs)
    assert_matches_pyg(ours, theirs, torch.randn(N, 7), edges(2))


@pytest.mark.parametrize("fill_value", ["mean", 0.5, "add"])
@pytest.mark.parametrize("edge_dim", [1, 3])
def test_gatv2_conv_edge_features_match_pyg(edge_dim, fill_value):
    ours, theirs = pair(6, 4, heads=2, edge_dim=edge_dim, fill_value=fill_value)
    edge_index = edges(3)
    shape = (edge_index.shape[1],) if edge_dim == 1 else (edge_index.shape[1], edge_dim)
    edge_attr = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    x = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    assert_same_as_pyg(ours, theirs, (x, edge_attr), x, edge_index, edge_attr)
    graph = fg.Graph.from_edge_index(edge_index, N)
    torch.testing.assert_close(ours(x, graph, edge_attr), theirs(x, edge_index, edge_attr))


@pytest.mark.parametrize("loops", [True, False])
def test_gatv2_conv_bipartite_as_pyg(loops):
    ours, theirs = pair((5, 4), 3, heads=2, add_self_loops=loops, residual=True)
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(NUM_DST, 4, dtype=torch.float64, requires_grad=True)
    assert_same_as_pyg(ours, theirs, (x_src, x_dst), (x_src, x_dst), edge_index)
    with pytest.raises(ValueError, match="x: GATv2Conv needs the destinations' features"):
        ours((x_src, None), edge_index)


def test_gatv2_conv_attention_weights_and_dropout_as_pyg():
    ours, theirs = pair(8, 4, heads=2, dropout=0.4)
    x, edge_index = torch.randn(N, 8), edges(4)
    results = []
    for conv in (ours, theirs):
        torch.manual_seed(7)  # the same draws: F.dropout on the same (E, heads) weights
        results.append(conv(x, edge_index, return_attention_weights=True))
    (out, (index, alpha)), (ref, (ref_index, ref_alpha)) = results
    torch.testing.assert_close(out, ref)
    assert torch.equal(index, ref_index)
    torch.testing.assert_close(alpha, ref_alpha)
    assert 0.2 < (alpha == 0).float().mean() < 0.6


def test_gatv2_conv_sparse_adjacency_and_fallback():
    ours, theirs = pair(4, 3, heads=2)
    x, edge_index = torch.randn(N, 4), edges(5)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.shape[1]), (N, N)).coalesce()
    torch.testing.assert_close(ours(x, adj_t.to_sparse_csr()), theirs(x, adj_t.to_sparse_csr()))
    with expect_fallback("attention weights of a sparse adj_t"):
        out, (adj, alpha) = ours(x, adj_t.to_sparse_csr(), return_attention_weights=True)
    assert adj.layout != torch.strided and alpha.shape == (adj._nnz(), 2)
    with pytest.raises(ValueError, match="edge_attr: given to a GATv2Conv without edge_dim"):
        ours(x, edge_index, torch.randn(edge_index.shape[1], 2))
    assert str(ours) == str(theirs)


def test_gatv2_conv_attention_weights_under_torch_compile_run_pyg_s_path():
    ours, theirs = pair(4, 3, heads=2)
    x, edge_index = torch.randn(N, 4), edges(6)
    with expect_fallback("attention weights in traced code"):
        out, (_, alpha) = torch.compile(ours, backend="eager")(x, edge_index, return_attention_weights=True)
    expected, (_, expected_alpha) = theirs(x, edge_index, return_attention_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(alpha, expected_alpha)
