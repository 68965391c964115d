import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn.sg_conv import SGConv
from tests.nn.reference import N, assert_matches_pyg, edges, expect_fallback

pyg_nn = pytest.importorskip("torch_geometric.nn")


def dense_propagation(edge_index, weight, num_nodes=N):
    """PyG's ``gcn_norm`` densely: existing loops leave the adjacency, each vertex gets one loop weighing its
    last existing loop's weight (else 1), then ``D^-1/2 A D^-1/2``."""
    src, dst = edge_index
    loop = src == dst
    a = torch.zeros(num_nodes, num_nodes, dtype=weight.dtype)
    a.index_put_((dst[~loop], src[~loop]), weight[~loop], accumulate=True)
    diag = torch.ones(num_nodes, dtype=weight.dtype)
    for e in loop.nonzero().flatten().tolist():
        diag[src[e]] = weight[e]
    a = a + torch.diag(diag)
    d = a.sum(1).pow(-0.5)
    return d.unsqueeze(1) * a * d.unsqueeze(0)


@pytest.mark.parametrize("channels", [(7, 5), (5, 9)], ids=["narrowing", "widening"])
def test_sg_conv_against_dense_and_gradcheck(channels):
    torch.manual_seed(0)
    conv = SGConv(*channels, K=3).double()
    edge_index = edges(1)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) + 0.5
    x = torch.randn(N, channels[0], dtype=torch.float64, requires_grad=True)
    a = dense_propagation(edge_index, weight)
    torch.testing.assert_close(conv(x, edge_index, weight), conv.lin(a @ a @ a @ x))
    assert gradcheck(lambda x, w: conv(x, edge_index, w), (x, weight.requires_grad_()), fast_mode=True)


@pytest.mark.parametrize("kwargs", [{"K": 2}, {"K": 1, "add_self_loops": False}, {"K": 3, "bias": False}])
@pytest.mark.parametrize("weighted", [False, True])
def test_sg_conv_matches_pyg(kwargs, weighted):
    torch.manual_seed(1)
    edge_index = edges(2)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) if weighted else None
    assert_matches_pyg(SGConv(9, 6, **kwargs), pyg_nn.SGConv(9, 6, **kwargs), torch.randn(N, 9), edge_index, weight)


def test_sg_conv_cached_keeps_the_first_propagation_as_pyg():
    torch.manual_seed(2)
    ours, theirs = SGConv(4, 3, K=2, cached=True), pyg_nn.SGConv(4, 3, K=2, cached=True)
    ours.load_state_dict(theirs.state_dict())
    x, edge_index = torch.randn(N, 4), edges(3)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    assert ours._cached_x is not None
    other = torch.randn(N, 4)  # PyG's cached layer ignores new features: so does ours
    torch.testing.assert_close(ours(other, edges(4)), theirs(other, edges(4)))
    ours.reset_parameters()
    assert ours._cached_x is None


def test_sg_conv_sparse_adjacency_and_graph():
    torch.manual_seed(3)
    edge_index = edges(5)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]  # PyG adds I on top of a sparse adj_t's loops
    weight = torch.rand(edge_index.shape[1])
    ours, theirs = SGConv(4, 3, K=2), pyg_nn.SGConv(4, 3, K=2)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 4)
    ref = theirs(x, edge_index, weight)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), weight, (N, N)).coalesce().to_sparse_csr()
    torch.testing.assert_close(ours(x, adj_t), theirs(x, adj_t))
    torch.testing.assert_close(ours(x, fg.Graph.from_edge_index(edge_index, N, edge_weight=weight)), ref)


def test_sg_conv_falls_back_to_pyg_with_a_warning():
    torch.manual_seed(4)
    edge_index = edges(6)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.shape[1]), (N, N)).coalesce()
    ours, theirs = SGConv(4, 3), pyg_nn.SGConv(4, 3)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 4)
    with expect_fallback("self loops"):
        torch.testing.assert_close(ours(x, adj_t.to_sparse_csr()), theirs(x, adj_t.to_sparse_csr()))
    assert str(ours) == str(theirs) == "SGConv(4, 3, K=1)"


def test_sg_conv_rejects_bipartite_input():
    with pytest.raises(ValueError, match="x: this layer takes one vertex set"):
        SGConv(4, 3)((torch.randn(N, 4), torch.randn(3, 4)), edges())
