"""``RelGraphConv`` against an edge-by-edge R-GCN in dense torch, and against DGL's where it installs."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

from featgraph import Graph
from featgraph.graph.interop import import_dgl
from featgraph.nn import RelGraphConv
from tests.conftest import random_edges
from tests.nn.reference import dense_weights

CASES = [(None, None), ("basis", 2), ("bdd", 3)]


def reference(layer: RelGraphConv, src, dst, num_dst, feat, etypes, norm) -> torch.Tensor:
    """Messages ``norm[e] * feat[u] @ W[etype[e]]`` one edge at a time, summed per destination, then DGL's
    layer norm, bias and self loop."""
    weights = dense_weights(layer.linear_r)
    messages = torch.stack([feat[src[e]] @ weights[etypes[e]] for e in range(src.numel())])
    if norm is not None:
        messages = messages * norm.reshape(-1, 1)
    h = torch.zeros(num_dst, weights.shape[2], dtype=feat.dtype).index_add(0, dst, messages)
    if layer.layer_norm:
        h = layer.layer_norm_weight(h)
    if layer.bias:
        h = h + layer.h_bias
    if layer.self_loop:
        h = h + feat[:num_dst] @ layer.loop_weight
    return h


@pytest.mark.parametrize(("regularizer", "num_bases"), CASES)
@pytest.mark.parametrize("options", [{}, {"self_loop": False, "bias": False}, {"layer_norm": True}])
@pytest.mark.parametrize("bipartite", [False, True])
def test_forward_and_gradients_match_the_edge_by_edge_layer(regularizer, num_bases, options, bipartite):
    """A multigraph with self loops and isolated nodes, 4 relations (one unused), mean-style norms; odd sizes."""
    torch.manual_seed(3)
    num_src, num_dst = (30, 12) if bipartite else (30, 30)
    src, dst = random_edges(num_src, 120, seed=5)
    dst = dst % num_dst
    etypes = torch.randint(0, 3, (120,))
    norm = torch.rand(120, 1, dtype=torch.float64)
    g = Graph(src, dst, (num_src, num_dst)) if bipartite else Graph(src, dst, num_src)
    layer = RelGraphConv(9, 15, 4, regularizer, num_bases, **options).double()
    feat = torch.randn(num_src, 9, dtype=torch.float64, requires_grad=True)
    out = layer(g, feat, etypes, norm)
    want = reference(layer, src, dst, num_dst, feat, etypes, norm)
    torch.testing.assert_close(out, want)
    grad = torch.randn_like(out)
    leaves = [feat, *layer.parameters()]
    got = torch.autograd.grad(out, leaves, grad, allow_unused=True)
    expected = torch.autograd.grad(want, leaves, grad, allow_unused=True)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)


def test_gradcheck_and_errors():
    torch.manual_seed(4)
    src, dst = random_edges(10, 40, seed=2)
    g, etypes = Graph(src, dst, 10), torch.randint(0, 3, (40,))
    layer = RelGraphConv(4, 6, 3, "basis", 2).double()
    feat = torch.randn(10, 4, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda x, *params: layer(g, x, etypes), (feat, *layer.parameters()))
    with pytest.raises(ValueError, match=r"^norm: expected one value per edge \(40\)"):
        layer(g, feat, etypes, torch.ones(39, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="^norm: a constant per edge"):
        layer(g, feat, etypes, torch.ones(40, 1, dtype=torch.float64, requires_grad=True))


@pytest.mark.parametrize(("regularizer", "num_bases"), CASES)
def test_dgls_layer_with_the_same_state_gives_the_same_output(regularizer, num_bases):
    dgl = import_dgl()
    if dgl is None:
        pytest.skip("DGL is not installed")
    torch.manual_seed(5)
    src, dst = random_edges(40, 300, seed=7)
    etypes, norm = torch.randint(0, 5, (300,)), torch.rand(300, 1)
    theirs = dgl.nn.pytorch.RelGraphConv(12, 6, 5, regularizer, num_bases, layer_norm=True)
    ours = RelGraphConv(12, 6, 5, regularizer, num_bases, layer_norm=True)
    ours.load_state_dict(theirs.state_dict())
    dgl_graph, feat = dgl.graph((src, dst), num_nodes=40), torch.randn(40, 12)
    want = theirs(dgl_graph, feat, etypes, norm)
    torch.testing.assert_close(ours(dgl_graph, feat, etypes, norm), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours(Graph(src, dst, 40), feat, etypes, norm), want, rtol=1e-5, atol=1e-5)
