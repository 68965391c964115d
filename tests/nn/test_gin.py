import pytest
import torch
from torch.autograd import gradcheck

from featgraph import nn as fg_nn
from featgraph.nn import GINConv
from tests.nn.reference import (
    NUM_DST,
    NUM_SRC,
    N,
    assert_matches_pyg,
    assert_same_as_pyg,
    bipartite_edges,
    edges,
    expect_fallback,
    pyg_conv,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")


def mlp(widths):
    return torch.nn.Sequential(torch.nn.Linear(widths[0], widths[1]), torch.nn.ReLU(), torch.nn.Linear(*widths[1:]))


@pytest.mark.parametrize("widths", [(9, 4, 3), (3, 8, 2)], ids=["narrowing-first", "widening-first"])
def test_gin_conv_against_dense(widths):
    torch.manual_seed(0)
    conv = GINConv(mlp(widths), eps=0.3, train_eps=True).double()
    edge_index = edges(10)
    x = torch.randn(N, widths[0], dtype=torch.float64, requires_grad=True)
    a = torch.zeros(N, N, dtype=torch.float64).index_put_(
        (edge_index[1], edge_index[0]), torch.ones(edge_index.shape[1], dtype=torch.float64), accumulate=True
    )
    torch.testing.assert_close(conv(x, edge_index), conv.nn(a @ x + 1.3 * x))
    assert gradcheck(lambda x: conv(x, edge_index), (x,))


@pytest.mark.parametrize("train_eps", [False, True])
@pytest.mark.parametrize("nn", ["linear", "mlp", "relu-first"])
def test_gin_conv_matches_pyg(train_eps, nn):
    torch.manual_seed(5)
    make = {
        "linear": lambda: torch.nn.Linear(10, 4),
        "mlp": lambda: mlp((10, 6, 4)),
        "relu-first": lambda: torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(10, 4)),
    }[nn]
    theirs = pyg_conv("GINConv")(make(), eps=0.2, train_eps=train_eps)
    assert_matches_pyg(GINConv(make(), eps=0.2, train_eps=train_eps), theirs, torch.randn(N, 10), edges(11))


@pytest.mark.parametrize("width", [3, 8], ids=["narrowing-linear-first", "widening"])
def test_bipartite_inputs_as_pyg(width):
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(NUM_DST, 5, dtype=torch.float64, requires_grad=True)

    def make(module):
        return module.GINConv(torch.nn.Sequential(torch.nn.Linear(5, width), torch.nn.ReLU()), train_eps=True)

    assert_same_as_pyg(make(fg_nn), make(pyg_nn), (x_src, x_dst), (x_src, x_dst), edge_index)
    assert_same_as_pyg(make(fg_nn), make(pyg_nn), (x_src,), (x_src, None), edge_index, size=(NUM_SRC, NUM_DST))


@pytest.mark.parametrize("aggr", ["mean", "max", "std"])
def test_other_aggregations_as_pyg(aggr):
    """PyG's ``aggr=`` keyword: mean and max fused, std on PyG's path with a warning; all PyG's numbers."""
    torch.manual_seed(9)
    theirs = pyg_conv("GINConv")(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()), aggr=aggr)
    ours = GINConv(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()), aggr=aggr)
    if aggr == "std":
        with expect_fallback("aggr=std"):
            assert_matches_pyg(ours, theirs, torch.randn(N, 8), edges(3))
    else:
        assert_matches_pyg(ours, theirs, torch.randn(N, 8), edges(3))
