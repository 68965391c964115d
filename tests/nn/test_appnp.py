import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn.appnp import APPNP
from tests.nn.reference import N, edges, expect_fallback
from tests.nn.test_sg_conv import dense_propagation

pyg_nn = pytest.importorskip("torch_geometric.nn")


def test_appnp_against_dense_and_gradcheck():
    edge_index = edges(1)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) + 0.5
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    a = dense_propagation(edge_index, weight)
    want = x
    for _ in range(3):
        want = 0.8 * (a @ want) + 0.2 * x
    conv = APPNP(K=3, alpha=0.2)
    torch.testing.assert_close(conv(x, edge_index, weight), want)
    assert gradcheck(lambda x, w: conv(x, edge_index, w), (x, weight.requires_grad_()), fast_mode=True)


@pytest.mark.parametrize("kwargs", [{}, {"add_self_loops": False}, {"normalize": False}, {"cached": True}])
@pytest.mark.parametrize("weighted", [False, True])
def test_appnp_matches_pyg(kwargs, weighted):
    edge_index = edges(2)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) if weighted else None
    ours, theirs = APPNP(K=4, alpha=0.1, **kwargs), pyg_nn.APPNP(K=4, alpha=0.1, **kwargs)
    x = torch.randn(N, 7, dtype=torch.float64)
    for _ in range(2):  # with cached, the second call reads the cache
        results = []
        for conv in (ours, theirs):
            inp = x.clone().requires_grad_()
            out = conv(inp, edge_index, weight)
            out.backward(torch.ones_like(out))
            results.append((out, inp.grad))
        torch.testing.assert_close(results[0][0], results[1][0])
        torch.testing.assert_close(results[0][1], results[1][1])


def test_appnp_cached_graph_serves_every_input_form_until_reset():
    edge_index = edges(3)
    ours, theirs = APPNP(K=2, alpha=0.1, cached=True), pyg_nn.APPNP(K=2, alpha=0.1, cached=True)
    x = torch.randn(N, 4)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    assert ours._cached_edge_index is not None
    other = fg.Graph.from_edge_index(edges(4), N)  # the cached graph serves, as in PyG
    torch.testing.assert_close(ours(x, other), theirs(x, torch.stack(other.coo())))
    ours.reset_parameters()
    assert ours._cached_edge_index is None
    torch.testing.assert_close(ours(x, other), pyg_nn.APPNP(K=2, alpha=0.1)(x, torch.stack(other.coo())))


@pytest.mark.parametrize("weighted", [False, True])
def test_appnp_edge_dropout_drops_the_edges_pyg_drops(weighted):
    """Training with edge dropout: F.dropout on PyG's normalised weights, in the same order, so the same seed
    gives PyG's output and gradient."""
    x, edge_index = torch.randn(N, 4, dtype=torch.float64), edges(5)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) if weighted else None
    results = []
    for conv in (APPNP(K=3, alpha=0.1, dropout=0.5), pyg_nn.APPNP(K=3, alpha=0.1, dropout=0.5)):
        inp = x.clone().requires_grad_()
        torch.manual_seed(11)
        out = conv(inp, edge_index, weight)
        out.backward(torch.ones_like(out))
        results.append((out, inp.grad))
    torch.testing.assert_close(results[0], results[1])
    assert not torch.allclose(results[0][0], APPNP(K=3, alpha=0.1).eval()(x, edge_index, weight))


def test_appnp_edge_dropout_without_normalize_runs_pyg_s_path():
    x, edge_index = torch.randn(N, 4), edges(5)
    conv = APPNP(K=2, alpha=0.1, dropout=1.0, normalize=False)
    with expect_fallback("edge dropout in training without normalize"):
        torch.testing.assert_close(conv(x, edge_index, torch.rand(edge_index.shape[1])), 0.1 * x)
    assert str(conv) == "APPNP(K=2, alpha=0.1)"
