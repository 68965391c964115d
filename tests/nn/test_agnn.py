import pytest
import torch
from torch.autograd import gradcheck

from featgraph.nn import AGNNConv
from tests.nn.reference import N, assert_matches_pyg, edges, per_vertex, pyg_conv, with_self_loops


@pytest.mark.parametrize("requires_grad", [True, False])
def test_agnn_conv_against_per_vertex_loop(requires_grad):
    conv = AGNNConv(requires_grad=requires_grad).double()
    if requires_grad:
        conv.beta.data.fill_(1.7)
    edge_index = edges(8)
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    looped = with_self_loops(edge_index)
    unit = torch.nn.functional.normalize(x, dim=-1)

    def attend(v, into):
        sources = looped[0, into]
        alpha = torch.softmax(conv.beta * (unit[sources] * unit[v]).sum(-1), dim=0)
        return (alpha.unsqueeze(1) * x[sources]).sum(0)

    torch.testing.assert_close(conv(x, edge_index), per_vertex(looped, N, 5, attend))
    assert gradcheck(lambda x: conv(x, edge_index), (x,))
    assert ("beta" in dict(conv.named_parameters())) == requires_grad


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_agnn_conv_matches_pyg(add_self_loops):
    theirs = pyg_conv("AGNNConv")(add_self_loops=add_self_loops)
    theirs.beta.data.fill_(0.6)
    assert_matches_pyg(AGNNConv(add_self_loops=add_self_loops), theirs, torch.randn(N, 9), edges(9))


def test_bipartite_input_is_refused_naming_x():
    with pytest.raises(ValueError, match="^x: AGNNConv takes one vertex set"):
        AGNNConv()((torch.randn(N, 4), torch.randn(3, 4)), edges())
