"""The mechanism shared by featgraph's layers: they are PyG's classes, run PyG's forward (with one warning per
reason) wherever the fused path does not apply, and give PyG's numbers either way."""

import warnings

import pytest
import torch

import featgraph.nn as fg_nn
from featgraph import Graph
from featgraph.nn import GATConv, GCNConv, SAGEConv
from featgraph.nn.pyg_layer import FallbackWarning, linear_first, project
from tests.nn.reference import NUM_DST, NUM_SRC, N, bipartite_edges, edges, expect_fallback

pyg_nn = pytest.importorskip("torch_geometric.nn")
LAYERS = ("GCNConv", "SAGEConv", "GATConv", "GINConv", "AGNNConv", "EdgeConv")


def _no_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


def test_layers_are_pygs_classes_with_pygs_repr():
    for name in LAYERS:
        assert issubclass(getattr(fg_nn, name), getattr(pyg_nn, name))
    assert repr(GCNConv(16, 32)) == "GCNConv(16, 32)"
    assert repr(SAGEConv((8, 16), 32, aggr="max")) == "SAGEConv((8, 16), 32, aggr=max)"
    assert repr(GATConv(8, 32, heads=2)) == "GATConv(8, 32, heads=2)"
    assert list(GATConv(8, 4, edge_dim=3).state_dict()) == list(pyg_nn.GATConv(8, 4, edge_dim=3).state_dict())


def test_message_passing_hooks_run_pygs_path_once_warned():
    torch.manual_seed(0)
    conv, x, edge_index = GCNConv(8, 4), torch.randn(N, 8), edges()
    fused = _no_warning(lambda: conv(x, edge_index))
    seen = []
    handle = conv.register_message_forward_pre_hook(lambda module, inputs: seen.append(inputs[0]["x_j"].shape))
    with expect_fallback("hooks registered on message passing"):
        torch.testing.assert_close(conv(x, edge_index), fused)
    assert seen
    _no_warning(lambda: conv(x, edge_index))  # once per layer class and reason
    handle.remove()
    torch.testing.assert_close(_no_warning(lambda: conv(x, edge_index)), fused)


def test_decomposed_layers_flow_and_explain_run_pygs_path():
    torch.manual_seed(1)
    x, edge_index = torch.randn(N, 8), edges()
    gcn = GCNConv(8, 4)
    fused = gcn(x, edge_index)
    gcn.decomposed_layers = 2
    with expect_fallback("decomposed_layers"):
        torch.testing.assert_close(gcn(x, edge_index), fused)
    conv = SAGEConv(8, 4)
    fused = conv(x, edge_index)
    conv.flow = "target_to_source"
    with expect_fallback("flow='target_to_source'"):
        torch.testing.assert_close(conv(x, edge_index.flip(0)), fused)
    conv.flow = "source_to_target"
    conv.explain = True
    conv._edge_mask = torch.full((edge_index.shape[1],), 50.0)  # sigmoid(50) == 1: every message kept
    with expect_fallback("explain mode"):
        torch.testing.assert_close(conv(x, edge_index), fused)


def test_a_lazy_layer_initialises_on_pygs_path_then_runs_fused():
    torch.manual_seed(2)
    conv, x, edge_index = SAGEConv(-1, 4), torch.randn(N, 8), edges()
    with expect_fallback("lazy parameters"):
        first = conv(x, edge_index)
    assert conv.lin_l.weight.shape == (4, 8)
    torch.testing.assert_close(_no_warning(lambda: conv(x, edge_index)), first)


def test_sparse_and_batched_x_as_pyg_or_an_error_naming_x():
    """GCNConv takes a sparse COO x and a static graph's (B, N, F) x as PyG does; GATConv, whose PyG layer
    takes no batched x, raises a ValueError naming x."""
    torch.manual_seed(3)
    conv, x, edge_index = GCNConv(8, 4), torch.randn(2, N, 8), edges()
    with expect_fallback("x of 3 dimensions"):
        batched = conv(x, edge_index)
    torch.testing.assert_close(batched, torch.stack([conv(x[0], edge_index), conv(x[1], edge_index)]))
    with expect_fallback("x is not a dense tensor"):
        torch.testing.assert_close(conv(x[0].to_sparse(), edge_index), conv(x[0], edge_index))
    with pytest.raises(ValueError, match=r"^x: GATConv cannot take an x of shape \(2, 20, 8\)"):
        GATConv(8, 4)(x, edge_index)
    with pytest.raises(ValueError, match=r"^x: SAGEConv cannot take an x of dtype torch.int64"):
        SAGEConv(8, 4)(torch.ones(N, 8, dtype=torch.int64), edge_index)


def test_a_graph_reaches_pygs_path_as_edge_index_and_size():
    """On PyG's path a featgraph Graph becomes its edge_index (a block: with size, and a tensor of its
    sources gives the destinations its first rows), with the same results as the fused path."""
    torch.manual_seed(4)
    block = Graph.from_edge_index(bipartite_edges(), num_nodes=(NUM_SRC, NUM_DST))
    conv, x = SAGEConv(8, 4), torch.randn(NUM_SRC, 8)
    fused = conv(x, block)
    conv.register_propagate_forward_pre_hook(lambda module, inputs: None)
    with expect_fallback("hooks"):
        torch.testing.assert_close(conv(x, block), fused)
    torch.testing.assert_close(conv.fallback("size given by position", x, block, None), fused)
    weighted = Graph.from_edge_index(edges(), N, edge_weight=torch.rand(edges().shape[1]))
    gcn, x = GCNConv(8, 4), torch.randn(N, 8)
    fused = gcn(x, weighted)
    gcn.register_propagate_forward_pre_hook(lambda module, inputs: None)
    torch.testing.assert_close(gcn(x, weighted), fused)


def test_torchscript_compiles_pygs_layer_on_the_same_parameters():
    torch.manual_seed(5)
    conv, x, edge_index = GCNConv(8, 4), torch.randn(N, 8), edges()
    scripted = torch.jit.script(conv)
    torch.testing.assert_close(scripted(x, edge_index), conv(x, edge_index))
    assert scripted.lin.weight.data_ptr() == conv.lin.weight.data_ptr()


def test_adjacency_values_requiring_grad_get_their_gradient_on_pygs_path():
    torch.manual_seed(6)
    edge_index = edges()
    edge_index = edge_index[:, edge_index[0] != edge_index[1]].unique(dim=1)
    values = torch.rand(edge_index.shape[1], requires_grad=True)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), values, (N, N)).coalesce()
    with expect_fallback("the adjacency's values require grad"):
        out = GCNConv(8, 4, normalize=False)(torch.randn(N, 8), adj_t)
    (grad,) = torch.autograd.grad(out.sum(), values)
    assert bool(grad.any())


@pytest.mark.parametrize(
    ("sizes", "num_edges", "in_channels", "out_channels", "expected"),
    [
        ((100, 100), 3000, 256, 47, True),  # square: the narrower side, whatever the edge count
        ((100, 100), 3000, 47, 256, False),
        ((100, 100), 10, 256, 47, True),
        ((15000, 1024), 15000, 256, 47, False),  # a sampled block's output layer: far fewer destinations
        ((2000, 1024), 200_000, 256, 47, True),  # many edges per source: narrowing pays again
    ],
)
def test_linear_first_picks_the_cheaper_order(sizes, num_edges, in_channels, out_channels, expected):
    """Against the two orders' multiply-add counts computed here from dense shapes."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, sizes[0], (num_edges,), generator=gen)
    dst = torch.randint(0, sizes[1], (num_edges,), generator=gen)
    graph = Graph(src, dst, sizes)
    lin_then_aggregate = sizes[0] * in_channels * out_channels + num_edges * out_channels
    aggregate_then_lin = num_edges * in_channels + sizes[1] * in_channels * out_channels
    assert linear_first(graph, in_channels, out_channels) == expected == (lin_then_aggregate < aggregate_then_lin)


class DoubledGCN(fg_nn.GCNConv):
    """A user's subclass of featgraph's layer overriding a message-passing step the fused kernels skip."""

    def message(self, x_j, edge_weight):
        return 2 * super().message(x_j, edge_weight)


class DoubledPyGGCN(pyg_nn.GCNConv):
    def message(self, x_j, edge_weight):
        return 2 * super().message(x_j, edge_weight)


def test_a_subclass_overriding_a_step_runs_pygs_path_with_its_override():
    """As PyG's contrib WeightedGATConv(GATConv) does with edge_update: the fused path would skip the override."""
    torch.manual_seed(0)
    ours, theirs = DoubledGCN(8, 4), DoubledPyGGCN(8, 4)
    ours.load_state_dict(theirs.state_dict())
    x, edge_index = torch.randn(N, 8), edges()
    with pytest.warns(FallbackWarning, match="DoubledGCN overrides message"):
        out = ours(x, edge_index)
    torch.testing.assert_close(out, theirs(x, edge_index))
    assert fg_nn.GCNConv._overridden_steps == () and DoubledGCN._overridden_steps == ("message",)


@pytest.mark.parametrize("layer", ["GCNConv", "GATConv"])
def test_bag_of_words_features_give_pygs_output_and_gradients(layer):
    """Cora-like features (1% nonzero, wide enough for the compressed first product): PyG's output and the
    gradients of every parameter."""
    torch.manual_seed(0)
    n, width = 300, 400
    x = torch.where(torch.rand(n, width) < 0.01, torch.rand(n, width), 0.0)
    edge_index = torch.randint(0, n, (2, 2000))
    kwargs = {"heads": 2} if layer == "GATConv" else {}
    theirs = getattr(pyg_nn, layer)(width, 16, **kwargs)
    ours = getattr(fg_nn, layer)(width, 16, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    grad = torch.randn(n, 16 * kwargs.get("heads", 1))
    got, want = _no_warning(lambda: ours(x, edge_index)), theirs(x, edge_index)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    got.backward(grad)
    want.backward(grad)
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_project_calls_linears_with_hooks_or_lazy_weights():
    """A Linear with a forward hook, or not yet initialised, is called as a module (its hook runs, it
    initialises); a plain one gives its own output."""
    calls = []
    hooked = torch.nn.Linear(400, 16)
    hooked.register_forward_hook(lambda module, args, out: calls.append(out.shape))
    x = torch.where(torch.rand(300, 400) < 0.01, 1.0, 0.0)
    torch.testing.assert_close(project(hooked, x), torch.nn.functional.linear(x, hooked.weight, hooked.bias))
    assert calls == [torch.Size([300, 16])]
    lazy = pyg_nn.Linear(-1, 16)
    assert project(lazy, x).shape == (300, 16) and lazy.weight.shape == (16, 400)
    plain = torch.nn.Linear(400, 16)
    torch.testing.assert_close(project(plain, x), plain(x))
