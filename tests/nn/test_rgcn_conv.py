import copy
import warnings

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn import FallbackWarning, FastRGCNConv, RGCNConv, accelerate
from tests.nn.reference import (
    NUM_DST,
    NUM_SRC,
    N,
    assert_matches_pyg,
    assert_same_as_pyg,
    bipartite_edges,
    edges,
    expect_fallback,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")
R = 5
LAYERS = [(RGCNConv, "RGCNConv"), (FastRGCNConv, "FastRGCNConv")]


def edge_types(count: int, seed: int = 0) -> torch.Tensor:
    """Relation ids in [0, R - 1): the last relation has no edge."""
    return torch.randint(0, R - 1, (count,), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("ours", "name"), LAYERS, ids=[n for _, n in LAYERS])
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"aggr": "add"}, {"aggr": "sum"}, {"num_bases": 3}, {"num_blocks": 2}, {"root_weight": False, "bias": False},
     {"num_bases": 2, "aggr": "add", "bias": False}],
    ids=lambda k: "-".join(f"{key}={v}" for key, v in k.items()) or "default",
)  # fmt: skip
def test_matches_pyg_forward_and_gradients(ours, name, kwargs):
    torch.manual_seed(0)
    channels = (6, 4) if "num_blocks" in kwargs else (7, 5)  # odd sizes where blocks allow
    theirs = getattr(pyg_nn, name)(*channels, R, **kwargs)
    edge_index = edges(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_matches_pyg(ours(*channels, R, **kwargs), theirs, torch.randn(N, channels[0]), edge_index,
                           edge_types(edge_index.shape[1]))  # fmt: skip


def test_against_a_dense_loop_per_relation_with_gradcheck():
    torch.manual_seed(1)
    conv = RGCNConv(3, 2, R).double()
    edge_index = edges(2)
    edge_type = edge_types(edge_index.shape[1], 2)
    x = torch.randn(N, 3, dtype=torch.float64, requires_grad=True)
    want = x @ conv.root + conv.bias
    for r in range(R):
        adjacency = torch.zeros(N, N, dtype=torch.float64)
        mask = edge_type == r
        ones = torch.ones(int(mask.sum()), dtype=torch.float64)
        adjacency.index_put_((edge_index[1, mask], edge_index[0, mask]), ones, accumulate=True)
        want = want + adjacency / adjacency.sum(1, keepdim=True).clamp(min=1) @ x @ conv.weight[r]
    torch.testing.assert_close(conv(x, edge_index, edge_type), want)
    assert gradcheck(lambda x, w: conv(x, edge_index, edge_type), (x, conv.weight))


@pytest.mark.parametrize(("ours", "name"), LAYERS, ids=[n for _, n in LAYERS])
def test_bipartite_pairs_and_graphs(ours, name):
    torch.manual_seed(3)
    edge_index = bipartite_edges(3)
    edge_type = edge_types(edge_index.shape[1], 3)
    x_src = torch.randn(NUM_SRC, 7, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(NUM_DST, 3, dtype=torch.float64, requires_grad=True)
    theirs, conv = getattr(pyg_nn, name)((7, 3), 5, R), ours((7, 3), 5, R)
    assert_same_as_pyg(conv, theirs, (x_src, x_dst), (x_src, x_dst), edge_index, edge_type)
    want = theirs((x_src, x_dst), edge_index, edge_type)
    block = fg.Graph.from_edge_index(edge_index, size=(NUM_SRC, NUM_DST))
    torch.testing.assert_close(conv((x_src, x_dst), block, edge_type), want)


def test_a_typed_graph_with_stacked_features():
    torch.manual_seed(4)
    hg = fg.HeteroGraph(
        {
            ("user", "rates", "item"): torch.tensor([[0, 0, 1, 4, 4], [0, 2, 2, 1, 1]]),
            ("item", "rated_by", "user"): torch.tensor([[0, 2, 2], [0, 0, 1]]),
            ("user", "follows", "user"): torch.tensor([[0, 1, 3, 3], [0, 2, 0, 0]]),
            ("item", "similar", "item"): torch.zeros(2, 0, dtype=torch.int64),
        },
        {"user": 6, "item": 4},
    )
    features = {"user": torch.randn(6, 8), "item": torch.randn(4, 8)}
    theirs = pyg_nn.RGCNConv(8, 3, hg.num_relations)
    conv = RGCNConv(8, 3, hg.num_relations)
    conv.load_state_dict(theirs.state_dict())
    x = hg.stack(features)
    out = conv(x, hg)
    torch.testing.assert_close(out, theirs(x, hg.graph.edge_index, hg.etype))
    assert hg.split(out)["item"].shape == (4, 3)
    with pytest.raises(ValueError, match="edge_type: a HeteroGraph carries its own"):
        conv(x, hg, hg.etype)


def test_is_sorted_gives_the_same_result():
    torch.manual_seed(5)
    edge_index = edges(5)
    edge_type, perm = torch.sort(edge_types(edge_index.shape[1], 5), stable=True)
    edge_index = edge_index[:, perm]
    theirs = pyg_nn.RGCNConv(4, 4, R, is_sorted=True)
    conv = RGCNConv(4, 4, R, is_sorted=True)
    conv.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 4)
    torch.testing.assert_close(conv(x, edge_index, edge_type), theirs(x, edge_index, edge_type))


@pytest.mark.parametrize(
    ("kwargs", "x", "reason"),
    [
        ({"aggr": "max"}, torch.randn(N, 4), "aggr='max'"),
        ({}, None, "featureless input"),
        ({}, torch.randn(N, 4).half(), "x of dtype torch.float16"),
    ],
    ids=["max", "featureless", "half"],
)
def test_other_calls_run_pygs_path(kwargs, x, reason):
    torch.manual_seed(6)
    channels = N if x is None else 4
    theirs = pyg_nn.RGCNConv(channels, 3, R, **kwargs)
    conv = RGCNConv(channels, 3, R, **kwargs)
    conv.load_state_dict(theirs.state_dict())
    if x is not None and x.dtype == torch.float16:
        conv, theirs = conv.half(), theirs.half()
    edge_index = edges(6)
    edge_type = edge_types(edge_index.shape[1], 6)
    with expect_fallback(reason):
        got = conv(x, edge_index, edge_type)
    torch.testing.assert_close(got, theirs(x, edge_index, edge_type))


def test_accelerate_swaps_both_layers():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg_nn.RGCNConv(4, 8, R, num_bases=2)
            self.conv2 = pyg_nn.FastRGCNConv(8, 3, R, aggr="add")

        def forward(self, x, edge_index, edge_type):
            return self.conv2(self.conv1(x, edge_index, edge_type).relu(), edge_index, edge_type)

    torch.manual_seed(7)
    model = Model()
    reference = copy.deepcopy(model)
    summary = accelerate(model)
    assert [(path, name) for path, name in summary.swapped] == [("conv1", "RGCNConv"), ("conv2", "FastRGCNConv")]
    assert type(model.conv1) is RGCNConv and type(model.conv2) is FastRGCNConv
    edge_index = edges(7)
    edge_type = edge_types(edge_index.shape[1], 7)
    x = torch.randn(N, 4)
    torch.testing.assert_close(model(x, edge_index, edge_type), reference(x, edge_index, edge_type))


def test_compiles_whole():
    torch.manual_seed(8)
    conv = RGCNConv(4, 3, R, num_bases=2)
    edge_index = edges(8)
    edge_type = edge_types(edge_index.shape[1], 8)
    x = torch.randn(N, 4, requires_grad=True)
    compiled = torch.compile(conv, backend="eager", fullgraph=True)
    got = compiled(x, edge_index, edge_type)
    torch.testing.assert_close(got, conv(x, edge_index, edge_type))
    (grad,) = torch.autograd.grad(got.sum(), x)
    torch.testing.assert_close(grad, torch.autograd.grad(conv(x, edge_index, edge_type).sum(), x)[0])


@pytest.mark.parametrize("seed", range(8))
def test_random_graphs_and_options_match_pyg(seed):
    """Random sizes, relation counts (some relations empty), bipartite or not, decompositions and aggregations."""
    gen = torch.Generator().manual_seed(100 + seed)

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=gen))

    relations, blocks = draw(1, 12), draw(1, 3)
    num_src, num_dst = draw(1, 30), draw(1, 30)
    bipartite = seed % 2 == 1
    num_dst = num_dst if bipartite else num_src
    channels_in, channels_out = blocks * draw(1, 5), blocks * draw(1, 5)
    edges_count = draw(0, 120)
    edge_index = torch.stack([torch.randint(0, num_src, (edges_count,), generator=gen),
                              torch.randint(0, num_dst, (edges_count,), generator=gen)])  # fmt: skip
    edge_type = torch.randint(0, relations, (edges_count,), generator=gen)
    kwargs = [{}, {"num_bases": draw(1, 4)}, {"num_blocks": blocks}][seed % 3]
    kwargs["aggr"] = ["mean", "add", "sum"][seed % 3 - 1]
    name = ["RGCNConv", "FastRGCNConv"][seed // 4]
    in_channels = (channels_in, draw(1, 6)) if bipartite else channels_in
    torch.manual_seed(seed)
    theirs = getattr(pyg_nn, name)(in_channels, channels_out, relations, **kwargs)
    ours = {"RGCNConv": RGCNConv, "FastRGCNConv": FastRGCNConv}[name](in_channels, channels_out, relations, **kwargs)
    x_src = torch.randn(num_src, channels_in, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        if bipartite:
            x_dst = torch.randn(num_dst, in_channels[1], dtype=torch.float64, requires_grad=True)
            assert_same_as_pyg(ours, theirs, (x_src, x_dst), (x_src, x_dst), edge_index, edge_type)
        else:
            assert_same_as_pyg(ours, theirs, (x_src,), x_src, edge_index, edge_type)
