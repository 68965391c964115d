import copy

import pytest
import torch
from torch.autograd import gradcheck

from featgraph.nn import EdgeConv
from tests.nn.reference import (
    NUM_DST,
    NUM_SRC,
    REDUCE,
    N,
    assert_matches_pyg,
    assert_same_as_pyg,
    bipartite_edges,
    edges,
    expect_fallback,
    per_vertex,
    pyg_conv,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")

D, OUT = 5, 4
NETS = {
    "linear": lambda: torch.nn.Linear(2 * D, OUT),
    "linear-relu": lambda: torch.nn.Sequential(torch.nn.Linear(2 * D, OUT), torch.nn.ReLU()),
    "linear-leaky": lambda: torch.nn.Sequential(torch.nn.Linear(2 * D, OUT), torch.nn.LeakyReLU(0.1)),
    "linear-tanh": lambda: torch.nn.Sequential(torch.nn.Linear(2 * D, OUT), torch.nn.Tanh()),
    "mlp (per edge)": lambda: torch.nn.Sequential(torch.nn.Linear(2 * D, 6), torch.nn.ReLU(), torch.nn.Linear(6, OUT)),
}


@pytest.mark.parametrize("aggr", ["max", "min", "sum", "mean"])
@pytest.mark.parametrize("net", list(NETS))
def test_edge_conv_against_per_vertex_loop(aggr, net):
    torch.manual_seed(0)
    conv = EdgeConv(NETS[net](), aggr=aggr).double()
    edge_index = edges(12)
    x = torch.randn(N, D, dtype=torch.float64, requires_grad=True)

    def aggregate(v, into):
        neighbours = x[edge_index[0, into]]
        return REDUCE[aggr](conv.nn(torch.cat([x[v].expand_as(neighbours), neighbours - x[v]], dim=1)))

    torch.testing.assert_close(conv(x, edge_index), per_vertex(edge_index, N, OUT, aggregate))
    assert gradcheck(lambda x: conv(x, edge_index), (x,))


@pytest.mark.parametrize("aggr", ["max", "add", "mean"])
@pytest.mark.parametrize("net", ["linear-relu", "mlp (per edge)"])
def test_edge_conv_matches_pyg(aggr, net):
    torch.manual_seed(6)
    theirs = pyg_conv("EdgeConv")(NETS[net](), aggr=aggr)
    assert_matches_pyg(EdgeConv(NETS[net](), aggr=aggr), theirs, torch.randn(N, D), edges(13))


def test_edge_conv_checks_its_input():
    with pytest.raises(ValueError, match="Could not resolve 'median2'"):
        EdgeConv(torch.nn.Linear(4, 2), aggr="median2")
    with pytest.raises(ValueError, match="expected 2 \\* 3"):
        EdgeConv(torch.nn.Linear(4, 2))(torch.randn(N, 3), edges())


def test_aggregations_featgraph_lacks_run_pygs_path():
    torch.manual_seed(8)
    theirs = pyg_conv("EdgeConv")(NETS["linear-relu"](), aggr="std")
    with expect_fallback("aggr=std"):
        assert_matches_pyg(EdgeConv(NETS["linear-relu"](), aggr="std"), theirs, torch.randn(N, D), edges(13))


@pytest.mark.parametrize(
    ("layers", "aggr"),
    [
        ([torch.nn.Linear(10, 4), torch.nn.ReLU()], "max"),
        ([torch.nn.Linear(10, 4)], "mean"),
        ([torch.nn.Linear(10, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)], "sum"),
    ],
    ids=["fused-max", "fused-mean", "per-edge-mlp"],
)
def test_bipartite_inputs_as_pyg(layers, aggr):
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(NUM_DST, 5, dtype=torch.float64, requires_grad=True)
    theirs = pyg_nn.EdgeConv(torch.nn.Sequential(*layers), aggr=aggr)
    ours = EdgeConv(copy.deepcopy(theirs.nn), aggr=aggr)
    assert_same_as_pyg(ours, theirs, (x_src, x_dst), (x_src, x_dst), edge_index)
    with pytest.raises(ValueError, match="needs the destinations' features"):
        ours((x_src, None), edge_index, size=(NUM_SRC, NUM_DST))
