import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import Graph
from featgraph.nn import SAGEConv
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


@pytest.mark.parametrize("aggr", ["mean", "sum", "max", "min", "pool"])
@pytest.mark.parametrize("channels", [(9, 4), (4, 9)], ids=["narrowing", "widening"])
def test_sage_conv_against_per_vertex_loop(aggr, channels):
    torch.manual_seed(0)
    conv = SAGEConv(*channels, aggr=aggr).double()
    edge_index = edges(3)
    x = torch.randn(N, channels[0], dtype=torch.float64, requires_grad=True)
    source = torch.relu(conv.lin(x)) if aggr == "pool" else x
    reduce = REDUCE["max" if aggr == "pool" else aggr]
    aggregated = per_vertex(edge_index, N, channels[0], lambda v, into: reduce(source[edge_index[0, into]]))
    torch.testing.assert_close(conv(x, edge_index), conv.lin_l(aggregated) + conv.lin_r(x))
    assert gradcheck(lambda x: conv(x, edge_index), (x,))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"aggr": "mean"},
        {"aggr": "mean", "normalize": True, "root_weight": False},
        {"aggr": "sum"},
        {"aggr": "max"},
        {"aggr": "max", "project": True},
    ],
    ids=lambda k: "-".join(f"{v}" for v in k.values()),
)
@pytest.mark.parametrize("channels", [(17, 6), (6, 17)], ids=["narrowing", "widening"])
def test_sage_conv_matches_pyg(kwargs, channels):
    torch.manual_seed(2)
    theirs = pyg_conv("SAGEConv")(*channels, **kwargs)
    assert_matches_pyg(SAGEConv(*channels, **kwargs), theirs, torch.randn(N, channels[0]), edges(4))


def test_pool_is_pygs_projected_max():
    conv = SAGEConv(5, 3, aggr="pool")
    assert conv.project and conv.aggr == "max" and conv.lin.weight.shape == (5, 5)


@pytest.mark.parametrize("aggr", ["lstm", ["mean", "max"], "std"])
def test_aggregations_featgraph_lacks_run_pygs_path(aggr):
    """An aggregation the fused SpMM does not compute runs PyG's own, with a FallbackWarning: PyG's numbers."""
    torch.manual_seed(3)
    edge_index = edges(4)
    edge_index = edge_index[:, edge_index[1].argsort(stable=True)]  # PyG's LSTM aggregation wants sorted targets
    theirs = pyg_conv("SAGEConv")(6, 5, aggr=aggr)
    with expect_fallback("aggr="):
        assert_matches_pyg(SAGEConv(6, 5, aggr=aggr), theirs, torch.randn(N, 6), edge_index)


@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_sage_conv_matches_pyg_through_the_triton_kernels(gpu, aggr):
    torch.manual_seed(2)
    theirs = pyg_conv("SAGEConv")(6, 5, aggr=aggr).to(gpu)
    with fg.default_target("gpu"):
        ours = SAGEConv(6, 5, aggr=aggr).to(gpu)
        assert_matches_pyg(ours, theirs, torch.randn(N, 6, device=gpu), edges(4).to(gpu))


@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
@pytest.mark.parametrize("form", ["pair", "size", "block"])
def test_bipartite_inputs_as_pyg(aggr, form):
    """PyG's bipartite forms: ``SAGEConv((in_src, in_dst), out)`` with ``(x_src, x_dst)``, with ``size=``,
    and a sampled block (a bipartite Graph) whose destinations are its sources' first rows."""
    edge_index = bipartite_edges()
    x_src = torch.randn(NUM_SRC, 5, dtype=torch.float64, requires_grad=True)
    if form == "block":
        block = Graph.from_edge_index(edge_index, size=(NUM_SRC, NUM_DST))
        ours, theirs = SAGEConv(5, 3, aggr=aggr), pyg_nn.SAGEConv(5, 3, aggr=aggr)
        ours.load_state_dict(theirs.state_dict())
        got = ours.double()(x_src, block)
        torch.testing.assert_close(got, theirs.double()((x_src, x_src[:NUM_DST]), edge_index))
        return
    x_dst = torch.randn(NUM_DST, 4, dtype=torch.float64, requires_grad=True)
    kwargs = {"size": (NUM_SRC, NUM_DST)} if form == "size" else {}
    ours, theirs = SAGEConv((5, 4), 3, aggr=aggr), pyg_nn.SAGEConv((5, 4), 3, aggr=aggr)
    assert_same_as_pyg(ours, theirs, (x_src, x_dst), (x_src, x_dst), edge_index, **kwargs)


def test_bipartite_rows_must_match():
    edge_index = bipartite_edges()
    with pytest.raises(ValueError, match="x_dst: expected 6 rows"):
        SAGEConv((5, 4), 3)((torch.randn(NUM_SRC, 5), torch.randn(7, 4)), edge_index, size=(NUM_SRC, NUM_DST))
    with pytest.raises(ValueError, match="size=\\(3, 6\\)"):
        SAGEConv(5, 3)(torch.randn(NUM_SRC, 5), edge_index, size=(3, 6))
    with pytest.raises(ValueError, match="edge_index: source id 16 out of range"):
        SAGEConv((5, 4), 3)((torch.randn(NUM_SRC - 1, 5), torch.randn(NUM_DST, 4)), edge_index)
