"""featgraph's HeteroConv against PyG's with PyG's layers and the same state dict: forward, gradients,
gradcheck, sum and mean over relations, layers that cannot join the fused sum, PyG's other call forms."""

import copy

import pytest
import torch

from featgraph.nn import accelerate
from featgraph.nn import relation_sum as relation_sum_module
from featgraph.nn.hetero_conv import HeteroConv

pyg_nn = pytest.importorskip("torch_geometric.nn")

fused = relation_sum_module.relation_sum
SIZES = {"paper": 13, "author": 9, "field": 5, "venue": 4}
WIDTHS = {"paper": 7, "author": 5, "field": 3, "venue": 6}  # odd widths, a different one per type


def typed_inputs(dtype=torch.float32, seed=0):
    """Features per node type and edge types with duplicates, self loops, isolated nodes and an empty relation."""
    gen = torch.Generator().manual_seed(seed)
    x = {t: torch.randn(n, WIDTHS[t], generator=gen, dtype=dtype) for t, n in SIZES.items()}

    def rel(src, dst, e):
        return torch.stack(
            [torch.randint(0, SIZES[src], (e,), generator=gen), torch.randint(0, SIZES[dst] - 1, (e,), generator=gen)]
        )

    cites = rel("paper", "paper", 30)
    cites = torch.cat([cites, cites[:, :4], torch.arange(3).repeat(2, 1)], dim=1)  # duplicates, self loops
    edges = {
        ("author", "writes", "paper"): rel("author", "paper", 25),
        ("paper", "cites", "paper"): cites,
        ("field", "rev_topic", "paper"): rel("field", "paper", 11),
        ("paper", "writtenby", "author"): rel("paper", "author", 20),
        ("venue", "hosts", "paper"): torch.empty(2, 0, dtype=torch.long),  # an empty relation
        ("paper", "topic", "field"): rel("paper", "field", 8),
    }
    return x, edges


def convs(kind, out=6, **options):
    def layer(src, dst):
        if kind == "sage":
            return pyg_nn.SAGEConv((WIDTHS[src], WIDTHS[dst]), out, **options)
        return pyg_nn.GraphConv((WIDTHS[src], WIDTHS[dst]), out, **options)

    _, edges = typed_inputs()
    return {et: layer(et[0], et[2]) for et in edges}


def pair(conv_dict, aggr="sum", dtype=torch.float32):
    torch.manual_seed(0)
    pyg = pyg_nn.HeteroConv(conv_dict, aggr=aggr).to(dtype)
    ours = copy.deepcopy(pyg)
    accelerate(ours)
    assert type(ours) is HeteroConv
    return pyg, ours


@pytest.mark.parametrize("aggr", ["sum", "mean"])
@pytest.mark.parametrize(
    ("kind", "options"),
    [("sage", {}), ("sage", {"aggr": "sum"}), ("sage", {"root_weight": False}), ("sage", {"aggr": "max"}),
     ("graph", {}), ("graph", {"aggr": "mean"})],
)  # fmt: skip
def test_matches_pyg_forward_and_gradients(kind, options, aggr, monkeypatch):
    pyg, ours = pair(convs(kind, **options), aggr)
    x, edges = typed_inputs()
    xs = {t: v.clone().requires_grad_() for t, v in x.items()}
    xr = {t: v.clone().requires_grad_() for t, v in x.items()}
    summed = []
    monkeypatch.setattr(relation_sum_module, "relation_sum", lambda terms: summed.append(len(terms)) or fused(terms))
    got, want = ours(xs, edges), pyg(xr, edges)
    assert sorted(summed) == [1, 1, 4]  # field and author one relation each, paper four (one of them empty)
    assert got.keys() == want.keys()
    probe = {t: torch.randn_like(v) for t, v in want.items()}
    for t in want:
        torch.testing.assert_close(got[t], want[t], atol=1e-5, rtol=1e-4)
    loss_ours = sum((got[t] * probe[t]).sum() for t in got)
    loss_pyg = sum((want[t] * probe[t]).sum() for t in want)
    params = [p for _, p in sorted(ours.named_parameters())]
    params_pyg = [p for _, p in sorted(pyg.named_parameters())]
    inputs_ours, inputs_pyg = [xs[t] for t in SIZES], [xr[t] for t in SIZES]
    ours_grads = torch.autograd.grad(loss_ours, params + inputs_ours, allow_unused=True)
    pyg_grads = torch.autograd.grad(loss_pyg, params_pyg + inputs_pyg, allow_unused=True)
    for a, b in zip(ours_grads, pyg_grads, strict=True):
        if b is None:
            assert a is None or torch.count_nonzero(a) == 0
        else:
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_gradcheck_in_float64():
    conv_dict = {
        ("author", "writes", "paper"): pyg_nn.SAGEConv((5, 7), 3),
        ("paper", "cites", "paper"): pyg_nn.SAGEConv(7, 3),
        ("field", "rev_topic", "paper"): pyg_nn.GraphConv((3, 7), 3),
    }
    _, ours = pair(conv_dict, dtype=torch.float64)
    x, edges = typed_inputs(torch.float64)
    names = ("author", "paper", "field")

    def run(*tensors):
        return ours(dict(zip(names, tensors, strict=True)), edges)["paper"]

    assert torch.autograd.gradcheck(run, tuple(x[t].requires_grad_() for t in names))


def test_layers_outside_the_fused_sum_run_their_own_forward():
    """A GATConv relation, a projecting SAGEConv and a weighted GraphConv join the sum by their own outputs."""
    conv_dict = convs("sage")
    conv_dict[("paper", "cites", "paper")] = pyg_nn.GATConv(7, 3, heads=2, add_self_loops=False)
    conv_dict[("author", "writes", "paper")] = pyg_nn.SAGEConv((5, 7), 6, project=True)
    pyg, ours = pair(conv_dict)
    x, edges = typed_inputs()
    got, want = ours(x, edges), pyg(x, edges)
    for t in want:
        torch.testing.assert_close(got[t], want[t], atol=1e-5, rtol=1e-4)


def test_other_calls_and_aggregations_run_pyg_forward():
    pyg, ours = pair(convs("graph"), aggr="max")
    x, edges = typed_inputs()
    weights = {et: torch.rand(e.shape[1]) for et, e in edges.items()}
    for call in ((x, edges), (x, edges, weights)):
        got, want = ours(*call), pyg(*call)
        for t in want:
            torch.testing.assert_close(got[t], want[t])
    pyg, ours = pair(convs("graph"))
    got, want = ours(x, edges, edge_weight_dict=weights), pyg(x, edges, edge_weight_dict=weights)
    for t in want:
        torch.testing.assert_close(got[t], want[t], atol=1e-5, rtol=1e-4)


def test_missing_edge_types_are_skipped_as_pyg_skips_them():
    pyg, ours = pair(convs("sage"))
    x, edges = typed_inputs()
    del edges[("paper", "writtenby", "author")]
    got, want = ours(x, edges), pyg(x, edges)
    assert got.keys() == want.keys() and "author" not in got
    for t in want:
        torch.testing.assert_close(got[t], want[t], atol=1e-5, rtol=1e-4)


def test_the_callers_tensors_are_left_unchanged():
    _, ours = pair(convs("sage"))
    x, edges = typed_inputs()
    before = {t: v.clone() for t, v in x.items()}
    ours(x, edges)["paper"].sum().backward()
    assert all(torch.equal(x[t], before[t]) for t in x)


def assert_same_seeded_first_call(pyg, ours, x, edges) -> None:
    """From one torch seed each, the two models' first calls give equal weights (lazy layers drawn in the same
    order) and outputs."""
    results = []
    for model in (pyg, ours):
        torch.manual_seed(7)
        results.append((model(x, edges), model.state_dict()))
    (want, want_state), (got, got_state) = results
    assert got_state.keys() == want_state.keys()
    for name in want_state:
        torch.testing.assert_close(got_state[name], want_state[name], rtol=0, atol=0, msg=name)
    assert got.keys() == want.keys()
    for t in want:
        torch.testing.assert_close(got[t], want[t], atol=1e-5, rtol=1e-4)


def test_lazy_layers_are_initialised_in_pyg_order():
    """Lazy layers (``in_channels=-1``) draw their weights on the first call: featgraph's HeteroConv calls its
    layers in edge-type order, as PyG's does, so one seed gives both the same weights and outputs (the relations
    into paper come before and after the one into author)."""
    _, edges = typed_inputs()
    conv_dict = {et: pyg_nn.SAGEConv((-1, -1), 6) for et in edges}
    conv_dict[("paper", "cites", "paper")] = pyg_nn.GraphConv(-1, 6)
    pyg, ours = pair(conv_dict)
    x, edges = typed_inputs()
    assert_same_seeded_first_call(pyg, ours, x, edges)
