import warnings

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn.gine_conv import GINEConv
from featgraph.nn.pyg_layer import FallbackWarning
from tests.nn.reference import NUM_DST, NUM_SRC, N, assert_same_as_pyg, bipartite_edges, edges, expect_fallback

pyg_nn = pytest.importorskip("torch_geometric.nn")


def mlp(d_in, d_out):
    return torch.nn.Sequential(torch.nn.Linear(d_in, 6), torch.nn.ReLU(), torch.nn.Linear(6, d_out))


def pair(edge_dim, d_in=5, eps=0.0, train_eps=False):
    """Featgraph's and PyG's GINEConv, same weights, float64."""
    torch.manual_seed(0)
    theirs = pyg_nn.GINEConv(mlp(d_in, 3), eps=eps, train_eps=train_eps, edge_dim=edge_dim).double()
    ours = GINEConv(mlp(d_in, 3), eps=eps, train_eps=train_eps, edge_dim=edge_dim).double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


@pytest.mark.parametrize("edge_dim", [None, 3])
def test_gine_conv_against_a_loop_and_gradcheck(edge_dim):
    ours, _ = pair(edge_dim, eps=0.3, train_eps=True)
    edge_index = edges(1)
    src, dst = edge_index
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(edge_index.shape[1], edge_dim or 5, dtype=torch.float64, requires_grad=True)
    projected = edge_attr if edge_dim is None else ours.lin(edge_attr)
    summed = torch.zeros(N, 5, dtype=torch.float64).index_add(0, dst, (x[src] + projected).relu())
    torch.testing.assert_close(ours(x, edge_index, edge_attr), ours.nn(summed + 1.3 * x))
    assert gradcheck(lambda x, e: ours(x, edge_index, e), (x, edge_attr), fast_mode=True)


@pytest.mark.parametrize("edge_dim", [None, 4])
def test_gine_conv_matches_pyg(edge_dim):
    ours, theirs = pair(edge_dim, d_in=7, eps=-0.2, train_eps=True)
    edge_index = edges(2)
    x = torch.randn(N, 7, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(edge_index.shape[1], edge_dim or 7, dtype=torch.float64, requires_grad=True)
    assert_same_as_pyg(ours, theirs, (x, edge_attr), x, edge_index, edge_attr)
    graph = fg.Graph.from_edge_index(edge_index, N)
    torch.testing.assert_close(ours(x, graph, edge_attr), theirs(x, edge_index, edge_attr))


@pytest.mark.parametrize("x_dst", ["given", "none"])
def test_gine_conv_bipartite_as_pyg(x_dst):
    ours, theirs = pair(2)
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    dst = torch.randn(NUM_DST, 5, dtype=torch.float64, requires_grad=True) if x_dst == "given" else None
    edge_attr = torch.randn(edge_index.shape[1], 2, dtype=torch.float64)
    inputs = (x_src,) if dst is None else (x_src, dst)
    assert_same_as_pyg(ours, theirs, inputs, (x_src, dst), edge_index, edge_attr, size=(NUM_SRC, NUM_DST))


def test_gine_conv_falls_back_to_pyg_and_names_bad_input():
    ours, theirs = pair(None)
    edge_index = edges(3)
    x = torch.randn(3, N, 5, dtype=torch.float64)  # a static graph's batch: PyG's path
    edge_attr = torch.randn(edge_index.shape[1], 5, dtype=torch.float64)
    with expect_fallback("x of 3 dimensions"):
        torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr))
    with pytest.raises(ValueError, match="edge_attr: GINEConv needs edge features"):
        ours(x[0], edge_index)
    with pytest.raises(ValueError, match="edge_attr: expected 5 features as x"):
        ours(x[0], edge_index, edge_attr[:, :4])
    assert str(ours) == str(theirs)


def test_gine_conv_under_torch_compile_runs_the_fused_operator():
    ours, theirs = pair(None)
    edge_index = edges(4)
    x, edge_attr = torch.randn(N, 5, dtype=torch.float64), torch.randn(edge_index.shape[1], 5, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        out = torch.compile(ours, backend="eager", fullgraph=True)(x, edge_index, edge_attr)
    torch.testing.assert_close(out, theirs(x, edge_index, edge_attr))
