import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.ops import attention
from tests.conftest import random_edges

N, E, HEADS, C, K = 13, 60, 2, 3, 4
NUM_SRC, NUM_DST = 9, 5


@pytest.fixture(scope="module", params=["one vertex set", "bipartite"])
def graph(request):
    """Duplicates, a self loop and isolated vertices; or a bipartite graph whose last destination is isolated."""
    if request.param == "bipartite":
        gen = torch.Generator().manual_seed(3)
        src, dst = torch.randint(0, NUM_SRC, (40,), generator=gen), torch.randint(0, NUM_DST - 1, (40,), generator=gen)
        src, dst = torch.cat([src, src[:2]]), torch.cat([dst, dst[:2]])
        return fg.Graph(src, dst, (NUM_SRC, NUM_DST))
    return fg.Graph(*random_edges(N, E, seed=8), N)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def sum_into_dst(g, per_edge):
    out = torch.zeros(g.num_dst_nodes, *per_edge.shape[1:], dtype=per_edge.dtype)
    return out.index_add(0, g.coo()[1], per_edge)


@pytest.mark.parametrize("with_edges", [False, True])
def test_gatv2_scores_against_dense(graph, with_edges):
    src, dst = graph.coo()
    xl, xr, att = rand(graph.num_src_nodes, HEADS, C), rand(graph.num_dst_nodes, HEADS, C), rand(HEADS, C)
    edge = (rand(graph.num_edges, HEADS, C),) if with_edges else ()

    def dense(xl, xr, att, edge_feat=None):
        x = xl[src] + xr[dst] + (edge_feat if edge_feat is not None else 0)
        return (F.leaky_relu(x, 0.3) * att).sum(-1)

    out = attention.gatv2_scores(graph, xl, xr, att, 0.3, *edge)
    assert out.shape == (graph.num_edges, HEADS)
    torch.testing.assert_close(out, dense(xl, xr, att, *edge))
    assert gradcheck(
        lambda *t: attention.gatv2_scores(graph, *t[:3], 0.3, *t[3:]), (xl, xr, att, *edge), fast_mode=True
    )


@pytest.mark.parametrize("with_edges", [False, True])
def test_dot_scores_against_dense(graph, with_edges):
    src, dst = graph.coo()
    q, k = rand(graph.num_dst_nodes, HEADS, C), rand(graph.num_src_nodes, HEADS, C)
    edge = (rand(graph.num_dst_nodes, HEADS, K), rand(graph.num_edges, K)) if with_edges else ()
    want = (q[dst] * k[src]).sum(-1)
    if with_edges:
        want = want + (edge[0][dst] * edge[1].unsqueeze(1)).sum(-1)
    torch.testing.assert_close(attention.dot_scores(graph, q, k, 0.5, *edge), 0.5 * want)
    assert gradcheck(lambda *t: attention.dot_scores(graph, t[0], t[1], 0.5, *t[2:]), (q, k, *edge), fast_mode=True)


def test_weighted_edge_sum_against_dense(graph):
    weights, edge_attr = rand(graph.num_edges, HEADS), rand(graph.num_edges, K)
    want = sum_into_dst(graph, weights.unsqueeze(-1) * edge_attr.unsqueeze(1))
    torch.testing.assert_close(attention.weighted_edge_sum(graph, weights, edge_attr), want)
    assert gradcheck(lambda *t: attention.weighted_edge_sum(graph, *t), (weights, edge_attr), fast_mode=True)


@pytest.mark.parametrize("projection", ["none", "weight", "weight and bias"])
def test_relu_edge_sum_against_dense(graph, projection):
    src, _ = graph.coo()
    x = rand(graph.num_src_nodes, 5)
    lin = {"none": (), "weight": (rand(5, K),), "weight and bias": (rand(5, K), rand(5))}[projection]
    edge_attr = rand(graph.num_edges, K if lin else 5)
    projected = F.linear(edge_attr, *lin) if lin else edge_attr
    want = sum_into_dst(graph, (x[src] + projected).relu())
    torch.testing.assert_close(attention.relu_edge_sum(graph, x, edge_attr, *lin), want)
    assert gradcheck(lambda *t: attention.relu_edge_sum(graph, *t), (x, edge_attr, *lin), fast_mode=True)


@pytest.mark.parametrize("wanted", ["weight", "bias", "weight and bias", "x and bias"])
def test_relu_edge_sum_gradients_of_some_inputs_only(graph, wanted):
    """A frozen weight or bias, or input features that need no gradient (a first layer): each gradient
    asked for matches the dense reference's."""
    src, _ = graph.coo()
    x, edge_attr, weight, bias = (
        rand(*shape).detach() for shape in ((graph.num_src_nodes, 5), (graph.num_edges, K), (5, K), (5,))
    )
    inputs = {"x": x, "weight": weight, "bias": bias}
    asked = [inputs[name].requires_grad_() for name in wanted.split(" and ")]
    grad = torch.randn(graph.num_dst_nodes, 5, dtype=x.dtype)
    got = torch.autograd.grad(attention.relu_edge_sum(graph, x, edge_attr, weight, bias), asked, grad)
    want = torch.autograd.grad(sum_into_dst(graph, (x[src] + F.linear(edge_attr, weight, bias)).relu()), asked, grad)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


def test_bad_arguments_are_named():
    g = fg.Graph(*random_edges(N, E, seed=8), N)
    x = torch.randn(N, HEADS, C)
    with pytest.raises(ValueError, match="feat_dst: expected 13 rows"):
        attention.gatv2_scores(g, x, x[:4], torch.randn(HEADS, C))
    with pytest.raises(ValueError, match=r"att: expected shape \(2, 3\)"):
        attention.gatv2_scores(g, x, x, torch.randn(HEADS, C + 1))
    with pytest.raises(ValueError, match=r"edge_feat: expected shape \(60, 2, 3\)"):
        attention.gatv2_scores(g, x, x, torch.randn(HEADS, C), 0.2, torch.randn(E, HEADS, C + 1))
    with pytest.raises(ValueError, match="edge_attr and its weight come together"):
        attention.dot_scores(g, x, x, edge_attr=torch.randn(E, K))
    with pytest.raises(ValueError, match=r"edge weight: expected shape \(13, 2, 4\)"):
        attention.dot_scores(g, x, x, 1.0, torch.randn(N, HEADS, 5), torch.randn(E, K))
    with pytest.raises(TypeError, match="key: expected torch.float32"):
        attention.dot_scores(g, x, x.double())
    with pytest.raises(ValueError, match="edge_attr: expected 60 rows"):
        attention.weighted_edge_sum(g, torch.randn(E, HEADS), torch.randn(E - 1, K))
    with pytest.raises(ValueError, match="edge_attr: expected 7 features as x"):
        attention.relu_edge_sum(g, torch.randn(N, 7), torch.randn(E, K))
    with pytest.raises(ValueError, match=r"weight: expected shape \(7, 4\)"):
        attention.relu_edge_sum(g, torch.randn(N, 7), torch.randn(E, K), torch.randn(K, 7))
    with pytest.raises(ValueError, match="bias: given without a weight"):
        attention.relu_edge_sum(g, torch.randn(N, K), torch.randn(E, K), bias=torch.randn(K))


def test_inputs_are_not_modified():
    g = fg.Graph(*random_edges(N, E, seed=8), N)
    x, att, edge_feat = torch.randn(N, HEADS, C), torch.randn(HEADS, C), torch.randn(E, HEADS, C)
    copies = [t.clone() for t in (x, att, edge_feat)]
    attention.gatv2_scores(g, x, x, att, 0.2, edge_feat)
    for t, copy in zip((x, att, edge_feat), copies, strict=True):
        assert torch.equal(t, copy)
