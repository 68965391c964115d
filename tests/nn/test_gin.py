import pytest
import torch
from torch.autograd import gradcheck

from featgraph.nn import GINConv
from tests.nn.reference import N, assert_matches_pyg, edges, pyg_conv


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
