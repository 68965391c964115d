import pytest
import torch
from torch.autograd import gradcheck

from featgraph.nn import GCNConv
from tests.nn.reference import E, N, assert_matches_pyg, edges, pyg_conv


def dense_gcn(conv, x, edge_index, weight, improved):
    """(D^-1/2 (A + fill I) D^-1/2) x W^T + b with fill only where a vertex has no self loop."""
    src, dst = edge_index
    a = torch.zeros(N, N, dtype=x.dtype).index_put_((dst, src), weight, accumulate=True)
    has_loop = torch.zeros(N, dtype=torch.bool)
    has_loop[src[src == dst]] = True
    a = a + torch.diag((~has_loop).to(x.dtype) * (2.0 if improved else 1.0))
    dinv = a.sum(1).pow(-0.5)
    return (dinv.unsqueeze(1) * a * dinv) @ x @ conv.lin.weight.t() + conv.bias


@pytest.mark.parametrize("channels", [(7, 3), (3, 7)], ids=["lin-first", "aggregate-first"])
@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_conv_against_dense(channels, improved, weighted):
    torch.manual_seed(0)
    conv = GCNConv(*channels, improved=improved).double()
    torch.nn.init.normal_(conv.bias)
    edge_index = edges(1)
    weight = torch.rand(E, dtype=torch.float64) + 0.1 if weighted else None
    x = torch.randn(N, channels[0], dtype=torch.float64, requires_grad=True)
    ref_weight = weight if weighted else torch.ones(E, dtype=torch.float64)
    torch.testing.assert_close(conv(x, edge_index, weight), dense_gcn(conv, x, edge_index, ref_weight, improved))
    assert gradcheck(lambda x: conv(x, edge_index, weight), (x,))


@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_gcn_conv_matches_pyg(improved, normalize):
    torch.manual_seed(1)
    edge_index = edges(2)
    keep = edge_index[0] != edge_index[1]  # PyG merges duplicate self loops; compare on loop-free input
    edge_index, weight = edge_index[:, keep], torch.rand(int(keep.sum())) + 0.1
    theirs = pyg_conv("GCNConv")(13, 5, improved=improved, normalize=normalize)
    torch.nn.init.normal_(theirs.bias)
    ours = GCNConv(13, 5, improved=improved, normalize=normalize)
    assert_matches_pyg(ours, theirs, torch.randn(N, 13), edge_index, weight.double())


def test_gcn_conv_rejects_loops_without_normalization():
    with pytest.raises(ValueError, match="self loops without normalization"):
        GCNConv(3, 4, add_self_loops=True, normalize=False)
