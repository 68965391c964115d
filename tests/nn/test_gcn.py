import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn import GCNConv
from tests.nn.reference import E, N, assert_matches_pyg, assert_same_as_pyg, edges, expect_fallback, pyg_conv


def dense_gcn(conv, x, edge_index, weight, improved):
    """PyG's normalisation densely: loops leave A, then each vertex gets one loop weighing its last
    existing loop's weight or the fill (2 when improved); D^-1/2 A D^-1/2 x W^T + b."""
    src, dst = edge_index
    loop = src == dst
    a = torch.zeros(N, N, dtype=x.dtype).index_put_((dst[~loop], src[~loop]), weight[~loop], accumulate=True)
    diag = torch.full((N,), 2.0 if improved else 1.0, dtype=x.dtype)
    for e in loop.nonzero().flatten().tolist():
        diag[src[e]] = weight[e]
    a = a + torch.diag(diag)
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
    edge_index[:, -3] = edge_index[:, 2]  # a duplicated self loop
    weight = torch.rand(E, dtype=torch.float64) + 0.1 if weighted else None
    x = torch.randn(N, channels[0], dtype=torch.float64, requires_grad=True)
    ref_weight = weight if weighted else torch.ones(E, dtype=torch.float64)
    loops_improved = improved and weighted  # PyG's edge_index path: loops weigh 1 without edge weights
    want = dense_gcn(conv, x, edge_index, ref_weight, loops_improved)
    torch.testing.assert_close(conv(x, edge_index, weight), want)
    assert gradcheck(lambda x: conv(x, edge_index, weight), (x,))


@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_gcn_conv_matches_pyg(improved, normalize):
    torch.manual_seed(1)
    edge_index = edges(2)
    edge_index[:, -3] = edge_index[:, 2]  # a duplicated self loop: PyG keeps one per vertex
    weight = torch.rand(edge_index.shape[1]) + 0.1
    theirs = pyg_conv("GCNConv")(13, 5, improved=improved, normalize=normalize)
    torch.nn.init.normal_(theirs.bias)
    ours = GCNConv(13, 5, improved=improved, normalize=normalize)
    assert_matches_pyg(ours, theirs, torch.randn(N, 13), edge_index, weight.double())


@pytest.mark.parametrize("improved", [False, True])
def test_learnable_edge_weight_receives_its_gradient(improved):
    """Passed to the layer, a learnable edge weight gets its gradient through the fused aggregation:
    gradcheck in float64, the dense reference's gradients and PyG's. (With a duplicated self loop only the
    last one's weight counts, and only it gets a gradient; PyG's index assignment gives one to both, so PyG
    is compared without the duplicate.) A Graph keeps a detached copy of its weights, so building one from
    a learnable weight is refused, with the way to pass it instead."""
    torch.manual_seed(2)
    theirs = pyg_conv("GCNConv")(5, 3, improved=improved).double()
    torch.nn.init.normal_(theirs.bias)
    ours = GCNConv(5, 3, improved=improved).double()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    w = (torch.rand(E, dtype=torch.float64) + 0.1).requires_grad_()
    upstream = torch.randn(N, 3, dtype=torch.float64)
    duplicated_loop = edges(1)
    duplicated_loop[:, -3] = duplicated_loop[:, 2]
    pyg = lambda conv, x, edge_index, w, improved: theirs(x, edge_index, w)  # noqa: E731
    for edge_index, reference in ((duplicated_loop, dense_gcn), (edges(1), pyg)):
        assert gradcheck(lambda x, w, edge_index=edge_index: ours(x, edge_index, w), (x, w))
        got = torch.autograd.grad(ours(x, edge_index, w), (x, w), upstream)
        want = torch.autograd.grad(reference(ours, x, edge_index, w, improved), (x, w), upstream)
        for ours_grad, want_grad in zip(got, want, strict=True):
            torch.testing.assert_close(ours_grad, want_grad)
    with pytest.raises(ValueError, match="edge_weight requires grad.*edge_weight=w"):
        ours(x, fg.Graph.from_edge_index(edges(1), N, edge_weight=w))


def test_gcn_conv_rejects_loops_without_normalization():
    with pytest.raises(ValueError, match="does not support adding self-loops"):
        GCNConv(3, 4, add_self_loops=True, normalize=False)


def test_gcn_conv_matches_pyg_through_the_triton_kernels(gpu):
    torch.manual_seed(0)
    theirs = pyg_conv("GCNConv")(7, 3).to(gpu)
    with fg.default_target("gpu"):
        assert_matches_pyg(GCNConv(7, 3).to(gpu), theirs, torch.randn(N, 7, device=gpu), edges(1).to(gpu))


@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("loops", [False, True])
def test_sparse_adj_t_as_pyg(improved, loops):
    """PyG adds I (2I when improved) on top of a torch sparse adj_t, where an edge_index keeps one loop per
    vertex: ours follows each form (an adj_t with self loops on PyG's path), forward and gradients."""
    torch.manual_seed(5)
    edge_index = edges(3).unique(dim=1)
    if not loops:
        edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) + 0.1
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), weight, (N, N)).coalesce().to_sparse_csr()
    theirs, ours = pyg_conv("GCNConv")(6, 4, improved=improved), GCNConv(6, 4, improved=improved)
    x = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    if loops:
        with expect_fallback("a sparse adj_t with self loops"):
            assert_same_as_pyg(ours, theirs, (x,), x, adj_t)
    else:
        assert_same_as_pyg(ours, theirs, (x,), x, adj_t)


def test_cached_keeps_the_first_graph_as_pyg():
    """``cached=True``: the first call's graph serves later calls (PyG's meaning), PyG's own cache is filled,
    and ``reset_parameters`` forgets it."""
    torch.manual_seed(6)
    theirs = pyg_conv("GCNConv")(6, 4, cached=True)
    ours = GCNConv(6, 4, cached=True)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 6)
    first, second = edges(1), edges(2)
    torch.testing.assert_close(ours(x, first), theirs(x, first))
    assert ours._cached_edge_index is not None
    torch.testing.assert_close(ours(x, second), theirs(x, second))  # both still on the first graph
    torch.testing.assert_close(ours(x, second), ours(x, first))
    ours.reset_parameters()
    ours.load_state_dict(theirs.state_dict())
    fresh = pyg_conv("GCNConv")(6, 4)
    fresh.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, second), fresh(x, second))
