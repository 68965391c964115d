import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from tests.conftest import assert_gpu_target_agrees, random_edges


def dense_softmax(g, scores):
    _, dst = g.coo()
    out = torch.empty_like(scores)
    for v in range(g.num_nodes):
        mask = dst == v
        if mask.any():
            out[mask] = torch.softmax(scores[mask], dim=0)
    return out


@pytest.mark.parametrize("heads", [(), (3,), (2, 1)])
def test_softmax_forward_and_gradient(heads):
    src, dst = random_edges(12, 60, seed=41)
    g = fg.Graph(src, dst, 12)
    scores = (torch.randn((60, *heads), dtype=torch.float64) * 3).requires_grad_()
    out = ops.edge_softmax(g, scores)
    torch.testing.assert_close(out, dense_softmax(g, scores.detach()))
    assert gradcheck(lambda s: ops.edge_softmax(g, s), (scores,))


def test_large_scores_are_stable_and_match_pyg():
    src, dst = random_edges(20, 100, seed=42)
    g = fg.Graph(src, dst, 20)
    scores = torch.randn(100, 4) * 100 + 1000  # exp would overflow without the max shift
    out = ops.edge_softmax(g, scores)
    assert torch.isfinite(out).all()
    pyg = pytest.importorskip("torch_geometric.utils")
    torch.testing.assert_close(out, pyg.softmax(scores, dst, num_nodes=20), rtol=1e-5, atol=1e-6)


def test_bad_scores():
    g = fg.Graph(torch.tensor([0]), torch.tensor([1]), 2)
    with pytest.raises(ValueError, match="one per edge"):
        ops.edge_softmax(g, torch.randn(2))


def test_through_the_triton_kernels(gpu):
    src, dst = random_edges(12, 60, seed=41)
    g = fg.Graph(src, dst, 12)
    scores = (torch.randn((60, 3), dtype=torch.float64) * 3).requires_grad_()
    out = assert_gpu_target_agrees(ops.edge_softmax, g, (scores,), gpu)
    torch.testing.assert_close(out, dense_softmax(g, scores.detach()))
