import copy
import warnings

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph.nn import FallbackWarning, RGATConv, accelerate
from tests.nn.reference import NUM_DST, NUM_SRC, N, assert_same_as_pyg, bipartite_edges, edges, expect_fallback

pyg_nn = pytest.importorskip("torch_geometric.nn")
R = 5
MECHANISMS = ["within-relation", "across-relation"]
MODES = ["additive-self-attention", "multiplicative-self-attention"]
OPTIONS = [
    {}, {"heads": 3}, {"heads": 3, "concat": False}, {"num_bases": 2}, {"num_blocks": 2, "heads": 2},
    {"edge_dim": 3, "heads": 3}, {"bias": False}, {"mod": "additive", "edge_dim": 3}, {"mod": "scaled", "heads": 3},
    {"mod": "f-additive"}, {"mod": "f-scaled", "heads": 2, "concat": False},
]  # fmt: skip


def edge_types(count: int, seed: int = 0) -> torch.Tensor:
    """Relation ids in [0, R - 1): the last relation has no edge."""
    return torch.randint(0, R - 1, (count,), generator=torch.Generator().manual_seed(seed))


def pyg_layer(*args, **kwargs) -> torch.nn.Module:
    """PyG's RGATConv with every parameter drawn (its ``reset_parameters`` leaves ``l2`` uninitialised and ``w``,
    ``l1``, ``b1``, ``b2`` constant, which would hide a wrong ``mod``)."""
    layer = pyg_nn.RGATConv(*args, **kwargs)
    for name in ("w", "l1", "b1", "l2", "b2"):
        torch.nn.init.normal_(getattr(layer, name), std=0.5)
    if layer.bias is not None:
        torch.nn.init.normal_(layer.bias)
    return layer


def layers(*args, **kwargs) -> tuple[RGATConv, torch.nn.Module]:
    """featgraph's layer with the weights of PyG's, and PyG's."""
    theirs = pyg_layer(*args, **kwargs)
    ours = RGATConv(*args, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def mode_options(mode: str, options: dict) -> dict:
    """``options`` with ``dim`` 2 for multiplicative attention (additive attention takes only 1)."""
    return {**options, "dim": 2} if mode.startswith("multiplicative") else options


@pytest.mark.parametrize("options", OPTIONS, ids=lambda k: "-".join(f"{key}={v}" for key, v in k.items()) or "default")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_matches_pyg_forward_and_gradients(mechanism, mode, options):
    torch.manual_seed(0)
    kwargs = {"attention_mechanism": mechanism, "attention_mode": mode, **mode_options(mode, options)}
    channels = (6, 4) if "num_blocks" in options else (7, 5)  # odd sizes where blocks allow
    theirs = pyg_layer(*channels, R, **kwargs)
    ours = RGATConv(*channels, R, **kwargs)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    edge_index = edges(1)  # duplicates, a self loop, isolated vertices
    x = torch.randn(N, channels[0], dtype=torch.float64, requires_grad=True)
    edge_attr = None
    if "edge_dim" in options:
        edge_attr = torch.randn(edge_index.shape[1], options["edge_dim"], dtype=torch.float64, requires_grad=True)
    inputs = (x,) if edge_attr is None else (x, edge_attr)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_same_as_pyg(ours, theirs, inputs, x, edge_index, edge_types(edge_index.shape[1], 1), edge_attr)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_attention_weights_are_pygs(mechanism):
    torch.manual_seed(2)
    ours, theirs = layers(7, 4, R, heads=2, attention_mechanism=mechanism, mod="f-additive")
    edge_index = edges(2)
    edge_type = edge_types(edge_index.shape[1], 2)
    x = torch.randn(N, 7)
    for flag in (True, False):  # PyG returns the weights for any bool
        out, (returned, alpha) = ours(x, edge_index, edge_type, return_attention_weights=flag)
        want, (_, want_alpha) = theirs(x, edge_index, edge_type, return_attention_weights=flag)
        assert returned is edge_index
        torch.testing.assert_close(out, want)
        torch.testing.assert_close(alpha, want_alpha)
    if mechanism == "across-relation":
        sums = torch.zeros(N, 2).index_add_(0, edge_index[1], alpha)
    else:
        sums = torch.zeros(N * R, 2).index_add_(0, edge_index[1] * R + edge_type, alpha)
    torch.testing.assert_close(sums[sums.sum(1) > 0], torch.ones(int((sums.sum(1) > 0).sum()), 2))


def test_dropout_draws_pygs_mask_in_training_and_none_in_eval():
    torch.manual_seed(3)
    ours, theirs = layers(7, 4, R, heads=2, dropout=0.5)
    edge_index = edges(3)
    edge_type = edge_types(edge_index.shape[1], 3)
    x = torch.randn(N, 7)
    torch.manual_seed(30)
    got = ours(x, edge_index, edge_type)
    torch.manual_seed(30)
    torch.testing.assert_close(got, theirs(x, edge_index, edge_type))  # same draw, same mask
    undropped, _ = layers(7, 4, R, heads=2)
    undropped.load_state_dict(ours.state_dict())
    assert not torch.allclose(got, undropped(x, edge_index, edge_type))
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(x, edge_index, edge_type), undropped(x, edge_index, edge_type))
    torch.testing.assert_close(ours(x, edge_index, edge_type), theirs(x, edge_index, edge_type))


@pytest.mark.parametrize(("mechanism", "mode"), [(MECHANISMS[0], MODES[0]), (MECHANISMS[1], MODES[1])])
def test_gradcheck(mechanism, mode):
    torch.manual_seed(4)
    conv = RGATConv(3, 2, 3, heads=2, attention_mechanism=mechanism, attention_mode=mode, edge_dim=2,
                    **mode_options(mode, {})).double()  # fmt: skip
    edge_index = torch.tensor([[0, 1, 2, 3, 3, 4, 1], [1, 1, 0, 0, 2, 2, 1]])
    edge_type = torch.tensor([0, 2, 2, 0, 1, 1, 0])
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(7, 2, dtype=torch.float64, requires_grad=True)
    params = (conv.weight, conv.q, conv.k, conv.e)

    def run(x, edge_attr, *_):
        return conv(x, edge_index, edge_type, edge_attr)

    assert gradcheck(run, (x, edge_attr, *params))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_no_edges(mechanism):
    torch.manual_seed(5)
    ours, theirs = layers(4, 3, R, heads=2, attention_mechanism=mechanism)
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    edge_index, edge_type = torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
    assert_same_as_pyg(ours, theirs, (x,), x, edge_index, edge_type)
    torch.testing.assert_close(ours(x, edge_index, edge_type), ours.bias.expand(6, 6))


def test_pairs_graphs_blocks_and_typed_graphs():
    torch.manual_seed(6)
    ours, theirs = layers(7, 3, R, heads=2)
    edge_index = bipartite_edges(6)
    edge_type = edge_types(edge_index.shape[1], 6)
    x_src = torch.randn(NUM_SRC, 7, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(NUM_DST, 7, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_same_as_pyg(ours, theirs, (x_src, x_dst), (x_src, x_dst), edge_index, edge_type)
        block = fg.Graph.from_edge_index(edge_index, size=(NUM_SRC, NUM_DST))
        want = theirs((x_src, x_src[:NUM_DST]), edge_index, edge_type)
        torch.testing.assert_close(ours(x_src, block, edge_type), want)
    hg = fg.HeteroGraph(
        {
            ("user", "rates", "item"): torch.tensor([[0, 0, 1, 4, 4], [0, 2, 2, 1, 1]]),
            ("item", "rated_by", "user"): torch.tensor([[0, 2, 2], [0, 0, 1]]),
            ("user", "follows", "user"): torch.tensor([[0, 1, 3, 3], [0, 2, 0, 0]]),
            ("item", "similar", "item"): torch.zeros(2, 0, dtype=torch.int64),
        },
        {"user": 6, "item": 4},
    )
    ours, theirs = layers(8, 3, hg.num_relations, attention_mechanism="within-relation")
    x = hg.stack({"user": torch.randn(6, 8), "item": torch.randn(4, 8)})
    torch.testing.assert_close(ours(x, hg), theirs(x, hg.graph.edge_index, hg.etype))
    with pytest.raises(ValueError, match="edge_type: a HeteroGraph carries its own"):
        ours(x, hg, hg.etype)


def test_bad_input_names_the_argument():
    conv = RGATConv(4, 3, R, edge_dim=2)
    edge_index = edges(7)
    edge_type = edge_types(edge_index.shape[1], 7)
    x = torch.randn(N, 4)
    with pytest.raises(IndexError, match=r"edge_type: relation ids must lie in \[0, 5\)"):
        conv(x, edge_index, torch.full_like(edge_type, R))
    with pytest.raises(IndexError, match="edge_type"):
        conv(x, edge_index, edge_type - 1)
    with pytest.raises(ValueError, match="edge_type: expected one relation id per edge"):
        conv(x, edge_index, edge_type[:-1])
    with pytest.raises(TypeError, match="edge_type: expected an integer tensor"):
        conv(x, edge_index, edge_type.float())
    with pytest.raises(ValueError, match="edge_attr: expected one row per edge"):
        conv(x, edge_index, edge_type, torch.randn(3, 2))


@pytest.mark.parametrize(
    ("kwargs", "dtype", "reason"),
    [({"aggr": "mean"}, torch.float32, "aggr='mean'"), ({}, torch.float16, "x of dtype torch.float16")],
    ids=["mean", "half"],
)
def test_other_calls_run_pygs_path(kwargs, dtype, reason):
    torch.manual_seed(8)
    ours, theirs = layers(4, 3, R, heads=2, **kwargs)
    ours.to(dtype), theirs.to(dtype)
    edge_index = edges(8)
    edge_type = edge_types(edge_index.shape[1], 8)
    x = torch.randn(N, 4).to(dtype)
    with expect_fallback(reason):
        got = ours(x, edge_index, edge_type)
    torch.testing.assert_close(got, theirs(x, edge_index, edge_type))


def test_accelerate_swaps_the_layer():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg_nn.RGATConv(4, 8, R, num_bases=2, heads=2, concat=False)
            self.conv2 = pyg_nn.RGATConv(8, 3, R, attention_mechanism="within-relation")

        def forward(self, x, edge_index, edge_type):
            return self.conv2(self.conv1(x, edge_index, edge_type).relu(), edge_index, edge_type)

    torch.manual_seed(9)
    model = Model()
    reference = copy.deepcopy(model)
    summary = accelerate(model)
    assert summary.swapped == [("conv1", "RGATConv"), ("conv2", "RGATConv")]
    assert type(model.conv1) is RGATConv and type(model.conv2) is RGATConv
    edge_index = edges(9)
    edge_type = edge_types(edge_index.shape[1], 9)
    x = torch.randn(N, 4)
    torch.testing.assert_close(model(x, edge_index, edge_type), reference(x, edge_index, edge_type))


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_and_options_match_pyg(seed):
    """Random sizes, relation counts (some relations empty) and options."""
    gen = torch.Generator().manual_seed(200 + seed)

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=gen))

    relations, heads, blocks = draw(1, 8), draw(1, 3), draw(1, 2)
    nodes, count = draw(1, 25), draw(0, 100)
    mode = MODES[seed % 2]
    kwargs = {
        "attention_mechanism": MECHANISMS[seed // 3 % 2], "attention_mode": mode, "heads": heads,
        "concat": seed % 3 != 0, "mod": [None, "additive", "scaled", "f-additive", "f-scaled"][draw(0, 4)],
        "dim": draw(1, 3) if mode == MODES[1] else 1,
    }  # fmt: skip
    if seed % 3 == 1:
        kwargs["num_bases"] = draw(1, 3)
    elif seed % 3 == 2:
        kwargs["num_blocks"] = blocks
    channels_in, channels_out = blocks * draw(1, 4), blocks * draw(1, 4)
    edge_index = torch.randint(0, nodes, (2, count), generator=gen)
    edge_type = torch.randint(0, relations, (count,), generator=gen)
    torch.manual_seed(seed)
    ours, theirs = layers(channels_in, channels_out, relations, **kwargs)
    x = torch.randn(nodes, channels_in, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_same_as_pyg(ours, theirs, (x,), x, edge_index, edge_type)
