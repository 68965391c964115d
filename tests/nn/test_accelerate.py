import copy
import inspect

import pytest
import torch
import torch.nn.functional as F
from torch.nn.functional import dropout as drop

import featgraph.nn as fg_nn
from featgraph.nn import accelerate
from tests.nn.reference import N, edges

pyg_nn = pytest.importorskip("torch_geometric.nn")


class OwnGCN(pyg_nn.GCNConv):
    """A user's subclass of a PyG layer: accelerate must keep its own methods."""

    def message(self, x_j, edge_weight):
        return 2 * super().message(x_j, edge_weight)


class Mixed(torch.nn.Module):
    """Supported layers (one with an aggregation featgraph lacks), an unsupported one, a subclass, plain torch."""

    def __init__(self):
        super().__init__()
        self.gcn = pyg_nn.GCNConv(8, 16)
        self.convs = torch.nn.ModuleList(
            [pyg_nn.SAGEConv(16, 16, aggr="max"), pyg_nn.GATConv(16, 4, heads=2), pyg_nn.SAGEConv(8, 8, aggr="std")]
        )
        self.gin = pyg_nn.GINConv(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), train_eps=True)
        self.cheb = pyg_nn.ChebConv(8, 8, K=2)
        self.own = OwnGCN(8, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x, edge_index):
        h = self.gcn(x, edge_index).relu()
        for conv in self.convs[:2]:
            h = conv(h, edge_index).relu()
        side = self.convs[2](x, edge_index) + self.gin(x, edge_index) + self.cheb(x, edge_index)
        return self.head(h[:, :8] + side + self.own(x, edge_index))


def test_accelerate_swaps_supported_layers_in_place_with_identical_outputs(capsys):
    torch.manual_seed(0)
    model = Mixed().double()
    reference = copy.deepcopy(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    gcn = model.gcn
    summary = accelerate(model, verbose=True)
    assert model.gcn is gcn and type(gcn) is fg_nn.GCNConv and isinstance(gcn, pyg_nn.GCNConv)
    assert [path for path, _ in summary.swapped] == ["gcn", "convs.0", "convs.1", "convs.2", "gin"]
    assert {path: why for path, _, why in summary.left} == {
        "cheb": "featgraph has no layer for it",
        "own": "a subclass of a PyG layer: its own methods are kept",
    }
    assert type(model.own) is OwnGCN and "5 module(s) accelerated, 2 left" in capsys.readouterr().out
    assert model.state_dict().keys() == state.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    x, edge_index = torch.randn(N, 8, dtype=torch.float64, requires_grad=True), edges()
    out, ref = model(x, edge_index), reference(x, edge_index)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(*(torch.autograd.grad(o.square().sum(), x)[0] for o in (out, ref)))
    assert accelerate(model).swapped == []  # already featgraph's


def test_accelerate_takes_a_single_layer_and_refuses_what_is_not_a_module():
    conv = pyg_nn.GCNConv(4, 4)
    assert accelerate(conv).swapped == [("", "GCNConv")] and type(conv) is fg_nn.GCNConv
    with pytest.raises(TypeError, match="^model: expected a torch.nn.Module"):
        accelerate("model")


@pytest.mark.parametrize("name", ["GCN", "GraphSAGE", "GAT", "GIN"])
def test_accelerate_pygs_own_models(name):
    """PyG's ready-made models (``torch_geometric.nn.models``) keep their outputs once their layers swap."""
    torch.manual_seed(1)
    model = getattr(pytest.importorskip("torch_geometric.nn.models"), name)(8, 16, 2, out_channels=3).eval()
    reference = copy.deepcopy(model)
    x, edge_index = torch.randn(N, 8), edges()
    summary = accelerate(model)
    assert [name for _, name in summary.swapped].count("Dropout") == 1 and len(summary.swapped) == 3
    assert type(model.dropout) is fg_nn.Dropout
    # PyG's MLP (in GIN) calls F.dropout in its forward: listed once for the class
    assert {name for _, name, _ in summary.left} == ({"MLP.forward"} if name == "GIN" else set())
    torch.testing.assert_close(model(x, edge_index), reference(x, edge_index))


class DropsInForward(torch.nn.Module):
    """A user's model calling torch's functional dropout three ways, beside a Dropout module."""

    def __init__(self):
        super().__init__()
        self.conv, self.drop = pyg_nn.GCNConv(8, 8), torch.nn.Dropout(0.25)

    def forward(self, x, edge_index):
        x = F.dropout(x, 0.5, self.training)
        x = torch.nn.functional.dropout(self.conv(x, edge_index), 0.5, self.training)
        return drop(self.drop(x), 0.1, self.training)


def test_accelerate_swaps_dropout_modules_and_lists_functional_dropout_calls():
    model = DropsInForward()
    summary = accelerate(model)
    assert type(model.drop) is fg_nn.Dropout and model.drop.p == 0.25
    assert ("drop", "Dropout") in summary.swapped
    first = inspect.getsourcelines(DropsInForward.forward)[1]
    assert [(path, name) for path, name, _ in summary.left] == [("", "DropsInForward.forward")] * 3
    assert sorted(int(why.split("line ")[1].split(":")[0]) - first for *_, why in summary.left) == [1, 2, 3]
    assert all("featgraph.nn.functional.dropout" in why for *_, why in summary.left)
    kept = DropsInForward()
    summary = accelerate(kept, dropout=False)
    assert type(kept.drop) is torch.nn.Dropout and summary.left == [] and ("drop", "Dropout") not in summary.swapped


class ScaledDropout(torch.nn.Dropout):
    """A user's Dropout subclass that inherits torch's forward (which calls F.dropout in torch's own file)."""


class OwnDropout(torch.nn.Dropout):
    """A user's Dropout subclass with its own forward calling F.dropout."""

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


def test_accelerate_lists_only_dropout_calls_in_the_users_own_forward_code():
    """An inherited forward from torch's files is not the user's code to edit: not listed; the user's own
    forward in a subclass is, at its line in the user's file."""
    model = torch.nn.Sequential(ScaledDropout(0.2), OwnDropout(0.3))
    summary = accelerate(model)
    assert [(path, name) for path, name, _ in summary.left] == [("1", "OwnDropout.forward")]
    (why,) = [why for *_, why in summary.left]
    assert f"line {inspect.getsourcelines(OwnDropout.forward)[1] + 1}:" in why
    assert all("torch/nn" not in why for *_, why in summary.left)
