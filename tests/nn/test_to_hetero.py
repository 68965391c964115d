"""accelerate on PyG's to_hetero models: the sums over relations become one sum_of_relation_parts call each, with
PyG's outputs, gradients and state dict; sums that hold other layers, and other aggregations, stay as built."""

import copy

import pytest
import torch

from featgraph.nn import accelerate
from featgraph.nn.to_hetero import fuse_relation_sums
from tests.nn.test_hetero_conv import SIZES, assert_same_seeded_first_call
from tests.nn.test_hetero_conv import typed_inputs as relations

pyg_nn = pytest.importorskip("torch_geometric.nn")


def typed_inputs():
    """The HeteroConv tests' inputs with a relation into venue: to_hetero updates every node type."""
    x, edges = relations()
    edges[("paper", "in", "venue")] = torch.stack([torch.arange(SIZES["venue"]), torch.arange(SIZES["venue"])])
    return x, edges


def model(layer, aggr="sum", widths=(8, 6), initialise=True):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = layer(widths[0]), layer(widths[1])

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    x, edges = typed_inputs()
    metadata = (list(SIZES), list(edges))
    torch.manual_seed(0)
    pyg = pyg_nn.to_hetero(Net(), metadata, aggr=aggr)
    if initialise:
        pyg(x, edges)  # the lazy sizes
    return pyg


def sage(out):
    return pyg_nn.SAGEConv((-1, -1), out)


def graph_conv(out):
    return pyg_nn.GraphConv((-1, -1), out)


def gat(out):
    return pyg_nn.GATConv((-1, -1), out, add_self_loops=False)


def check_same(pyg, ours):
    x, edges = typed_inputs()
    xs = {t: v.clone().requires_grad_() for t, v in x.items()}
    xr = {t: v.clone().requires_grad_() for t, v in x.items()}
    got, want = ours(xs, edges), pyg(xr, edges)
    assert got.keys() == want.keys()
    for t in want:
        torch.testing.assert_close(got[t], want[t], atol=1e-5, rtol=1e-4)
    loss = [
        sum((out[t] * (1 + torch.arange(out[t].numel()).view_as(out[t]) % 3)).sum() for t in out) for out in (got, want)
    ]
    params = [dict(m.named_parameters()) for m in (ours, pyg)]
    assert params[0].keys() == params[1].keys()
    names = sorted(params[1])
    grads = [
        torch.autograd.grad(total, [p[n] for n in names] + [v[t] for t in SIZES], allow_unused=True)
        for total, p, v in zip(loss, params, (xs, xr), strict=True)
    ]
    for a, b in zip(*grads, strict=True):
        if b is None:
            assert a is None or torch.count_nonzero(a) == 0
        else:
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("layer", [sage, graph_conv])
def test_sums_over_relations_become_one_call_with_pyg_results(layer):
    pyg = model(layer)
    ours = copy.deepcopy(pyg)
    summary = accelerate(ours)
    fused = [name for path, name in summary.swapped if name.startswith("sum over relations")]
    assert len(fused) == 2  # paper's sum in each layer (the other types have one relation each)
    assert "sum_of_relation_parts" in ours.code and "torch.add" not in ours.code
    assert ours.state_dict().keys() == pyg.state_dict().keys()
    check_same(pyg, ours)


def test_sums_holding_other_layers_stay():
    pyg = model(gat)
    ours = copy.deepcopy(pyg)
    accelerate(ours)
    assert "sum_of_relation_parts" not in ours.code
    check_same(pyg, ours)


@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_other_aggregations_over_relations(aggr):
    """to_hetero's mean divides its sum (fused); max stacks the outputs (left as built)."""
    pyg = model(sage, aggr=aggr)
    ours = copy.deepcopy(pyg)
    accelerate(ours)
    assert ("sum_of_relation_parts" in ours.code) == (aggr == "mean")
    check_same(pyg, ours)


def test_pyg_layers_are_not_fused():
    """Without accelerate's swap, PyG's layers give no relation terms: nothing is rewritten."""
    pyg = model(sage)
    assert fuse_relation_sums(copy.deepcopy(pyg)) == []


def test_the_rewritten_model_compiles_without_graph_breaks():
    pyg = model(sage)
    ours = copy.deepcopy(pyg)
    accelerate(ours)
    x, edges = typed_inputs()
    assert torch._dynamo.explain(ours)(x, edges).graph_break_count == 0
    got, want = torch.compile(ours, fullgraph=True)(x, edges), pyg(x, edges)
    for t in want:
        torch.testing.assert_close(got[t], want[t], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("layer", [sage, graph_conv])
def test_lazy_layers_are_initialised_in_pyg_order(layer):
    """The mini-batch guide's model, accelerated before its first call: its lazy layers draw their weights in
    to_hetero's call order (the relations into paper before and after the one into author), so one seed gives
    PyG's weights and outputs."""
    pyg = model(layer, initialise=False)
    ours = copy.deepcopy(pyg)
    accelerate(ours)
    x, edges = typed_inputs()
    assert_same_seeded_first_call(pyg, ours, x, edges)
