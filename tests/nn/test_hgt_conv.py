import copy
import warnings

import pytest
import torch
from torch.autograd import gradcheck

from featgraph.nn import FallbackWarning, HGTConv, accelerate, hgt_conv
from tests.nn.reference import expect_fallback

pyg_nn = pytest.importorskip("torch_geometric.nn")
COUNTS = {"author": 7, "paper": 9, "venue": 4}
EDGES = {
    ("author", "writes", "paper"): torch.tensor([[0, 1, 1, 1, 4, 6, 6], [0, 2, 2, 2, 8, 1, 0]]),  # duplicates
    ("paper", "written_by", "author"): torch.tensor([[0, 2, 8, 1], [0, 1, 4, 6]]),
    ("paper", "cites", "paper"): torch.tensor([[0, 3, 3, 5, 8], [0, 3, 1, 0, 8]]),  # self loops
    ("venue", "hosts", "paper"): torch.zeros(2, 0, dtype=torch.int64),  # no edges
}
# venue sends (no edges this call) and receives nothing; ("author", "visits", "venue") is absent from the call,
# so venue is a destination that receives no messages
METADATA = (list(COUNTS), [*EDGES, ("author", "visits", "venue")])


def features(widths: dict[str, int], seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {t: torch.randn(COUNTS[t], widths[t], generator=gen, dtype=torch.float64) for t in widths}


def layers(*args, **kwargs) -> tuple[HGTConv, torch.nn.Module]:
    """featgraph's layer with the weights of PyG's, and PyG's, every parameter drawn (PyG's ``reset_parameters``
    sets ``skip`` and ``p_rel`` to ones, which would hide a mixed-up type)."""
    theirs = pyg_nn.HGTConv(*args, **kwargs).double()
    for parameter in theirs.parameters():
        torch.nn.init.normal_(parameter, std=0.5)
    ours = HGTConv(*args, **kwargs).double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def assert_same_as_pyg(ours: HGTConv, theirs: torch.nn.Module, x_dict: dict, edge_index_dict: dict) -> None:
    """Same outputs (same node types, same order), and the same gradients of every input and parameter (one
    PyG leaves None is None or zero here)."""
    x_dict = {t: x.detach().requires_grad_() for t, x in x_dict.items()}
    got, want = ours(x_dict, edge_index_dict), theirs(x_dict, edge_index_dict)
    assert list(got) == list(want)
    for node_type in want:
        torch.testing.assert_close(got[node_type], want[node_type])
    gen = torch.Generator().manual_seed(1)
    upstream = [torch.randn(out.shape, generator=gen, dtype=out.dtype) for out in want.values()]
    inputs = list(x_dict.values())
    mine = torch.autograd.grad(list(got.values()), [*inputs, *ours.parameters()], upstream, allow_unused=True)
    pyg = torch.autograd.grad(list(want.values()), [*inputs, *theirs.parameters()], upstream, allow_unused=True)
    names = [*x_dict, *(name for name, _ in ours.named_parameters())]
    for name, a, b in zip(names, mine, pyg, strict=True):
        if b is None:
            assert a is None or not bool(a.any()), name
        else:
            torch.testing.assert_close(a, b, msg=f"gradient of {name}")


@pytest.mark.parametrize(("heads", "channels"), [(1, 9), (2, 6), (3, 9)])
@pytest.mark.parametrize("same_widths", [True, False], ids=["same-widths", "widths-differ"])
def test_matches_pyg_forward_and_gradients(heads, channels, same_widths):
    """Inputs as wide as the output (every node type's skip gate) or of three widths (the gate for one)."""
    torch.manual_seed(0)
    widths = dict.fromkeys(COUNTS, channels) if same_widths else {"author": 5, "paper": channels, "venue": 3}
    ours, theirs = layers(widths, channels, METADATA, heads=heads)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_same_as_pyg(ours, theirs, features(widths), EDGES)


def test_bipartite_relations_and_node_types_without_edges():
    """Two node types joined only across (no edge type within one), a subset of the metadata's edge types,
    node types without an edge type in the call or without features."""
    torch.manual_seed(1)
    edges = {et: EDGES[et] for et in [("author", "writes", "paper"), ("paper", "written_by", "author")]}
    ours, theirs = layers(5, 6, (["author", "paper", "venue"], [*EDGES]), heads=2)
    x_dict = features({"venue": 5, "paper": 5, "author": 5}, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_same_as_pyg(ours, theirs, x_dict, edges)
        assert_same_as_pyg(ours, theirs, {t: x_dict[t] for t in ("author", "paper")}, edges)


def test_edge_types_out_of_metadata_order_run_pygs_path():
    """PyG's result depends on the call's edge type order (its ``k_rel`` takes the rows as sorted by type)."""
    torch.manual_seed(6)
    ours, theirs = layers(5, 6, METADATA, heads=2)
    x_dict = features(dict.fromkeys(COUNTS, 5), 6)
    with expect_fallback("edge types in another order than the metadata's"):
        assert_same_as_pyg(ours, theirs, x_dict, dict(reversed(EDGES.items())))


def test_typed_graph_is_remembered_while_the_edges_are_the_same():
    """One typed graph for the layers of a model and its epochs; none on the layer (a copy or a save holds no
    graph)."""
    torch.manual_seed(2)
    ours, theirs = layers(4, 4, METADATA)
    x_dict = features(dict.fromkeys(COUNTS, 4), 2)
    ours(x_dict, EDGES)
    typed = set(map(id, hgt_conv._typed_graphs.values()))
    other = copy.deepcopy(ours)
    other(x_dict, {et: edges.clone() for et, edges in EDGES.items()})
    assert set(map(id, hgt_conv._typed_graphs.values())) == typed
    changed = {**EDGES, ("paper", "cites", "paper"): torch.tensor([[1, 2], [2, 1]])}
    assert_same_as_pyg(ours, theirs, x_dict, changed)
    assert len(set(map(id, hgt_conv._typed_graphs.values())) - typed) == 1


def test_gradcheck():
    torch.manual_seed(3)
    conv, _ = layers({"author": 4, "paper": 4, "venue": 3}, 4, METADATA, heads=2)
    x_dict = {t: x.requires_grad_() for t, x in features({"author": 4, "paper": 4, "venue": 3}, 3).items()}
    params = (conv.k_rel.weight, conv.v_rel.weight, conv.p_rel["paper__cites__paper"], conv.skip["author"],
              conv.kqv_lin.lins["paper"].weight, conv.out_lin.lins["author"].bias)  # fmt: skip

    def run(*tensors):
        return tuple(conv(dict(zip(x_dict, tensors[:3], strict=True)), EDGES).values())

    assert gradcheck(run, (*x_dict.values(), *params))


def test_bad_input_names_the_argument():
    conv = HGTConv(4, 4, METADATA)
    x_dict = {t: torch.randn(n, 4) for t, n in COUNTS.items()}
    bad = {**EDGES, ("paper", "cites", "paper"): torch.tensor([[0, 9], [1, 1]])}
    with pytest.raises(ValueError, match=r"edge_index_dict: .*'cites'.*source id 9 out of range"):
        conv(x_dict, bad)
    with pytest.raises(ValueError, match=r"edge_index_dict: .*'cites'.*\(2, E\)"):
        conv(x_dict, {**EDGES, ("paper", "cites", "paper"): torch.zeros(3, 2, dtype=torch.int64)})
    with pytest.raises(TypeError, match=r"edge_index_dict: .*'cites'.*integer ids"):
        conv(x_dict, {**EDGES, ("paper", "cites", "paper"): torch.zeros(2, 2)})


def test_lazy_parameters_and_sparse_adjacencies_run_pygs_path():
    torch.manual_seed(4)
    x_dict = features({"author": 5, "paper": 6, "venue": 3}, 4)
    ours = HGTConv(-1, 6, METADATA, heads=2).double()
    with expect_fallback("lazy parameters"):
        ours(x_dict, EDGES)
    theirs = pyg_nn.HGTConv(-1, 6, METADATA, heads=2).double()
    theirs(x_dict, EDGES)
    theirs.load_state_dict(ours.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_same_as_pyg(ours, theirs, x_dict, EDGES)
    adj_t = {
        (s, r, d): torch.sparse_coo_tensor(
            e.flip(0), torch.ones(e.shape[1]), (COUNTS[d], COUNTS[s]), check_invariants=True
        ).coalesce()
        for (s, r, d), e in EDGES.items()
    }
    want = theirs(x_dict, EDGES)
    with expect_fallback("an adjacency other than an edge_index tensor"):
        got = ours(x_dict, {et: adj.double() for et, adj in adj_t.items()})
    for node_type in want:
        torch.testing.assert_close(got[node_type], want[node_type])


def test_accelerate_swaps_the_layer():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg_nn.HGTConv(4, 6, METADATA, heads=2)
            self.conv2 = pyg_nn.HGTConv(6, 3, METADATA)

        def forward(self, x_dict, edge_index_dict):
            hidden = self.conv1(x_dict, edge_index_dict)
            return self.conv2({t: h.relu() for t, h in hidden.items()}, edge_index_dict)

    torch.manual_seed(5)
    model = Model()
    reference = copy.deepcopy(model)
    summary = accelerate(model)
    assert summary.swapped == [("conv1", "HGTConv"), ("conv2", "HGTConv")]
    assert type(model.conv1) is HGTConv
    edges = {et: e for et, e in EDGES.items() if et[-1] != "venue"}
    edges[("author", "visits", "venue")] = torch.tensor([[0, 3], [1, 1]])
    x_dict = {t: torch.randn(n, 4) for t, n in COUNTS.items()}
    got, want = model(x_dict, edges), reference(x_dict, edges)
    assert list(got) == list(want)
    for node_type in want:
        torch.testing.assert_close(got[node_type], want[node_type])


@pytest.mark.parametrize("seed", range(6))
def test_random_typed_graphs_match_pyg(seed):
    """Random node and edge types (2-3 node types, some edge types empty or absent), sizes and heads."""
    gen = torch.Generator().manual_seed(300 + seed)

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=gen))

    node_types = [f"t{i}" for i in range(draw(2, 3))]
    counts = {t: draw(1, 12) for t in node_types}
    edge_types = [(s, f"r{i}", d) for i, (s, d) in enumerate((s, d) for s in node_types for d in node_types)]
    edges = {}
    for s, r, d in edge_types:
        if draw(0, 3):
            count = draw(0, 30)
            edges[(s, r, d)] = torch.stack([torch.randint(0, counts[s], (count,), generator=gen),
                                            torch.randint(0, counts[d], (count,), generator=gen)])  # fmt: skip
    if not edges:
        edges[edge_types[0]] = torch.zeros(2, 0, dtype=torch.int64)
    heads = draw(1, 3)
    widths = {t: draw(1, 3) * heads if draw(0, 1) else 2 * heads + 1 for t in node_types}
    torch.manual_seed(seed)
    ours, theirs = layers(widths, heads * draw(1, 3), (node_types, edge_types), heads=heads)
    x_dict = {t: torch.randn(counts[t], widths[t], generator=gen, dtype=torch.float64) for t in node_types}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert_same_as_pyg(ours, theirs, x_dict, edges)
