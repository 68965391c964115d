import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn import GATConv
from tests.nn.reference import (
    NUM_DST,
    NUM_SRC,
    E,
    N,
    assert_matches_pyg,
    assert_same_as_pyg,
    bipartite_edges,
    edges,
    expect_fallback,
    per_vertex,
    pyg_conv,
    with_self_loops,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")


def per_vertex_gat(conv, x, edge_index):
    heads, channels = conv.heads, conv.out_channels
    feat = conv.lin(x).view(N, heads, channels)
    looped = with_self_loops(edge_index)
    src, dst = looped
    logits = torch.nn.functional.leaky_relu(
        (feat * conv.att_src).sum(-1)[src] + (feat * conv.att_dst).sum(-1)[dst], conv.negative_slope
    )

    def attend(v, into):
        alpha = torch.softmax(logits[into], dim=0)  # (k, heads)
        return (alpha.unsqueeze(-1) * feat[src[into]]).sum(0).flatten()

    out = per_vertex(looped, N, heads * channels, attend).view(N, heads, channels)
    out = out.flatten(1) if conv.concat else out.mean(1)
    return out + conv.bias


@pytest.mark.parametrize("heads,concat", [(1, True), (3, True), (3, False)])
def test_gat_conv_against_per_vertex_loop(heads, concat):
    torch.manual_seed(0)
    conv = GATConv(6, 5, heads=heads, concat=concat).double()
    torch.nn.init.normal_(conv.bias)
    edge_index = edges(5)
    x = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(conv(x, edge_index), per_vertex_gat(conv, x, edge_index))
    assert gradcheck(lambda x: conv(x, edge_index), (x,))


@pytest.mark.parametrize(
    "kwargs",
    [{"heads": 4}, {"heads": 2, "concat": False}, {"heads": 3, "residual": True}, {"add_self_loops": False}],
    ids=lambda k: "-".join(f"{n}={v}" for n, v in k.items()),
)
def test_gat_conv_matches_pyg(kwargs):
    torch.manual_seed(3)
    theirs = pyg_conv("GATConv")(11, 7, **kwargs)
    torch.nn.init.normal_(theirs.bias)
    assert_matches_pyg(GATConv(11, 7, **kwargs), theirs, torch.randn(N, 11), edges(6))


def test_gat_attention_weights_match_pyg_and_dropout_applies_to_them():
    torch.manual_seed(4)
    theirs = pyg_conv("GATConv")(8, 4, heads=2, dropout=0.5)
    ours = GATConv(8, 4, heads=2, dropout=0.5)
    ours.load_state_dict(theirs.state_dict())
    x, edge_index = torch.randn(N, 8), edges(7)
    (out, (index, alpha)), (ref, (ref_index, ref_alpha)) = (
        m.eval()(x, edge_index, return_attention_weights=True) for m in (ours, theirs)
    )
    torch.testing.assert_close(out, ref)
    assert torch.equal(index, ref_index)
    torch.testing.assert_close(alpha, ref_alpha)
    ours.train()  # attention dropout: the returned weights are the dropped ones, and the output uses them
    out, (index, alpha) = ours(x, edge_index, return_attention_weights=True)
    assert 0.3 < (alpha == 0).float().mean() < 0.7
    feat = ours.lin(x).view(N, 2, 4)
    expected = torch.zeros(N, 2, 4).index_add_(0, index[1], alpha.unsqueeze(-1) * feat[index[0]])
    torch.testing.assert_close(out, expected.flatten(1) + ours.bias)


@pytest.mark.parametrize("fill_value", ["mean", "add", 0.5, "tensor"])
@pytest.mark.parametrize("edge_dim", [1, 3])
def test_edge_features_match_pyg(edge_dim, fill_value):
    """``edge_dim``: one logit per edge and head folded from lin_edge and att_edge; the loops' term from
    ``fill_value`` (a constant, a tensor, or the mean / sum of the incoming edges' terms). Outputs and float64
    gradients of x, edge_attr and every parameter as PyG's, with an existing self loop replaced."""
    torch.manual_seed(5)
    if fill_value == "tensor":
        fill_value = torch.randn(edge_dim)
    edge_index = edges(8)
    edge_index[:, 0] = 3  # a self loop, removed before the loops are added
    theirs = pyg_conv("GATConv")(6, 4, heads=2, edge_dim=edge_dim, fill_value=fill_value)
    ours = GATConv(6, 4, heads=2, edge_dim=edge_dim, fill_value=fill_value)
    x = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    shape = (edge_index.shape[1],) if edge_dim == 1 else (edge_index.shape[1], edge_dim)
    edge_attr = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    assert_same_as_pyg(ours, theirs, (x, edge_attr), x, edge_index, edge_attr)


@pytest.mark.parametrize("fill_value", ["max", "mul"])
def test_edge_fill_reductions_featgraph_lacks_run_pygs_path(fill_value):
    torch.manual_seed(6)
    theirs = pyg_conv("GATConv")(6, 4, heads=2, edge_dim=2, fill_value=fill_value)
    ours = GATConv(6, 4, heads=2, edge_dim=2, fill_value=fill_value)
    x = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(E, 2, dtype=torch.float64)
    with expect_fallback(f"fill_value='{fill_value}'"):
        assert_same_as_pyg(ours, theirs, (x,), x, edges(8), edge_attr)


def test_attention_weights_of_a_sparse_adjacency_are_pygs():
    """With a torch sparse adj_t PyG returns the weights as a sparse (N, N, heads) tensor: so does ours."""
    torch.manual_seed(7)
    theirs = pyg_conv("GATConv")(6, 4, heads=2)
    ours = GATConv(6, 4, heads=2)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 6)
    adj_t = torch.sparse_coo_tensor(edges(9).flip(0), torch.ones(E), (N, N)).coalesce().to_sparse_csr()
    with expect_fallback("attention weights of a sparse adj_t"):
        out, (adj, alpha) = ours(x, adj_t, return_attention_weights=True)
    ref, (ref_adj, ref_alpha) = theirs(x, adj_t, return_attention_weights=True)
    torch.testing.assert_close(out, ref)
    assert adj.layout == ref_adj.layout and adj.shape == ref_adj.shape == (N, N, 2)
    torch.testing.assert_close(alpha, ref_alpha)


def test_gat_conv_errors_name_the_argument():
    """Features whose row count does not fit the graph: the error names edge_index or x, not a kernel's
    placeholder."""
    conv = GATConv(4, 4, heads=2)
    with pytest.raises(ValueError, match=r"^edge_index: node id \d+ out of range .*features have 10 rows"):
        conv(torch.randn(10, 4), edges())
    with pytest.raises(ValueError, match=f"^x: expected {N} rows .*got {N - 1}"):
        conv(torch.randn(N - 1, 4), fg.Graph.from_edge_index(edges(), N))


def test_gat_conv_matches_pyg_through_the_triton_kernels(gpu):
    torch.manual_seed(3)
    theirs = pyg_conv("GATConv")(11, 7, heads=2).to(gpu)
    with fg.default_target("gpu"):
        assert_matches_pyg(GATConv(11, 7, heads=2).to(gpu), theirs, torch.randn(N, 11, device=gpu), edges(6).to(gpu))


@pytest.mark.parametrize(
    ("kwargs", "x_dst_rows"),
    [({}, NUM_DST), ({"residual": True, "concat": False}, NUM_DST), ({}, None), ({"add_self_loops": False}, NUM_DST)],
    ids=["pair", "residual-mean", "no-destination-features", "no-loops"],
)
def test_bipartite_inputs_as_pyg(kwargs, x_dst_rows):
    """``GATConv((in_src, in_dst), out)`` on ``(x_src, x_dst)`` (``lin_src``/``lin_dst``), PyG's
    ``(x_src, None)`` with ``size``, self loops on the destinations' ids."""
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    x_dst = None if x_dst_rows is None else torch.randn(x_dst_rows, 4, dtype=torch.float64, requires_grad=True)
    ours, theirs = GATConv((5, 4), 3, heads=2, **kwargs), pyg_nn.GATConv((5, 4), 3, heads=2, **kwargs)
    inputs = (x_src,) if x_dst is None else (x_src, x_dst)
    assert_same_as_pyg(ours, theirs, inputs, (x_src, x_dst), edge_index, size=(NUM_SRC, NUM_DST))


def test_a_block_attends_from_its_sources_to_their_leading_rows():
    edge_index = bipartite_edges(1)
    x = torch.randn(NUM_SRC, 5, dtype=torch.float64)
    ours, theirs = GATConv(5, 3, heads=2), pyg_nn.GATConv(5, 3, heads=2)
    ours.load_state_dict(theirs.state_dict())
    block = fg.Graph.from_edge_index(edge_index, size=(NUM_SRC, NUM_DST))
    torch.testing.assert_close(ours.double()(x, block), theirs.double()((x, x[:NUM_DST]), edge_index))


def test_asking_for_attention_weights_leaves_the_output_bit_identical():
    """The output comes from the same fused passes whether or not the weights are returned (PyG's tests
    compare the two with allclose's default tolerance, which a one-ulp softmax difference can exceed)."""
    torch.manual_seed(8)
    conv, edge_index = GATConv(8, 32, heads=2), edges(10)
    for _ in range(5):
        x = torch.randn(N, 8)
        assert torch.equal(conv(x, edge_index, return_attention_weights=True)[0], conv(x, edge_index))
