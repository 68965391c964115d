"""featgraph.ops against dgl.ops on the same graph, where DGL is installed (the bench extra)."""

import pytest
import torch

import featgraph as fg
from featgraph import ops
from featgraph.graph.interop import import_dgl
from tests.conftest import random_edges

dgl = import_dgl()
pytestmark = pytest.mark.skipif(dgl is None, reason="DGL is not installed")
N, E = 14, 80


@pytest.fixture(scope="module")
def graphs():
    src, dst = random_edges(N, E, seed=91)
    return fg.Graph(src, dst, N), dgl.graph((src, dst), num_nodes=N)


@pytest.mark.parametrize("name", ["copy_u_sum", "u_mul_e_sum", "u_add_e_max", "u_div_e_mean", "copy_e_min"])
def test_gspmm_shortcuts_match_dgl(graphs, name):
    ours_g, theirs_g = graphs
    x = torch.randn(N, 2, 3, dtype=torch.float64, requires_grad=True)
    w = (torch.rand(E, 2, 1, dtype=torch.float64) + 0.5).requires_grad_()
    args = {"copy_u_sum": (x,), "copy_e_min": (w,)}.get(name, (x, w))
    ours = ops.SHORTCUTS[name](ours_g, *args)
    theirs = getattr(dgl.ops, name)(theirs_g, *args)
    if name.endswith(("_max", "_min")):  # DGL leaves +-inf at vertices without in-edges; featgraph gives 0
        isolated = ours_g.in_degrees() == 0
        assert torch.all(ours[isolated] == 0)
        theirs = torch.where(isolated.view(-1, 1, 1), torch.zeros_like(theirs), theirs)
    torch.testing.assert_close(ours, theirs)
    grads = torch.autograd.grad(ours.square().sum(), args)
    ref = torch.autograd.grad(theirs.square().sum(), args)
    for a, b in zip(grads, ref, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", ["u_dot_v", "u_add_v", "e_mul_v", "v_sub_u"])
def test_gsddmm_shortcuts_match_dgl(graphs, name):
    ours_g, theirs_g = graphs
    x = torch.randn(N, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(E, 4, dtype=torch.float64, requires_grad=True)
    args = (w, x) if name.startswith("e_") else (x, x)
    torch.testing.assert_close(ops.SHORTCUTS[name](ours_g, *args), getattr(dgl.ops, name)(theirs_g, *args))


def test_edge_softmax_matches_dgl(graphs):
    ours_g, theirs_g = graphs
    scores = torch.randn(E, 3, dtype=torch.float64)
    torch.testing.assert_close(ops.edge_softmax(ours_g, scores), dgl.ops.edge_softmax(theirs_g, scores))
