"""Property-based fuzz test of featgraph.nn's layers against PyG's layers with the same weights.

Each example draws a graph as tests/ops/test_fuzz.py does (no vertices, no edges, isolated vertices, self loops,
duplicate edges, a star of high in-degree), widths, and one of GCNConv, SAGEConv, GATConv, GINConv, AGNNConv
and EdgeConv with random options. PyG's layer (biases drawn at random, not zero) is loaded into featgraph's;
outputs and the gradients of the input and of every parameter must agree in float64
(``tests.nn.reference.assert_matches_pyg``). Derandomized; ``FEATGRAPH_FUZZ_EXAMPLES`` sets the number of
examples as in tests/ops/test_fuzz.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import featgraph.nn as fgnn
from tests.nn.reference import assert_matches_pyg, pyg_conv
from tests.ops.test_fuzz import FULL, FuzzGraph, fuzz, graphs

WIDTHS = (1, 2, 3, 5, 17)
Pair = tuple[torch.nn.Module, torch.nn.Module, tuple]  # featgraph's layer, PyG's, extra forward arguments


def pair(name: str, *args, nn: Callable[[], torch.nn.Module] | None = None, **kwargs):
    """The layer ``name`` from featgraph and from PyG with the same arguments; ``nn`` (GIN's, EdgeConv's)
    is built once for each, as their first argument."""

    def build(layer: type) -> torch.nn.Module:
        return layer(*(() if nn is None else (nn(),)), *args, **kwargs)

    return build(getattr(fgnn, name)), build(pyg_conv(name))


def flags(data: st.DataObject, *names: str) -> dict[str, bool]:
    return {name: data.draw(st.booleans(), label=name) for name in names}


def mlp(data: st.DataObject, width_in: int, width_out: int) -> Callable[[], torch.nn.Module]:
    """A builder of GIN's or EdgeConv's ``nn``: a Linear, a Linear and a monotone activation (fused by
    featgraph's EdgeConv), or a two-layer MLP (run per edge)."""
    kind = data.draw(st.sampled_from(["linear", "relu", "leaky", "tanh", "sigmoid", "mlp"]), label="nn")
    activations = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}
    activations["leaky"] = lambda: torch.nn.LeakyReLU(0.1)

    def build() -> torch.nn.Module:
        if kind == "linear":
            return torch.nn.Linear(width_in, width_out)
        if kind == "mlp":
            return torch.nn.Sequential(torch.nn.Linear(width_in, 4), torch.nn.ReLU(), torch.nn.Linear(4, width_out))
        return torch.nn.Sequential(torch.nn.Linear(width_in, width_out), activations[kind]())

    return build


def gcn(data: st.DataObject, fgraph: FuzzGraph, width_in: int, width_out: int) -> Pair:
    kwargs = flags(data, "improved", "normalize", "bias")
    # PyG's edge_index path applies ``improved`` only with edge weights; featgraph always does
    weighted = kwargs["improved"] or data.draw(st.booleans(), label="edge weights")
    weight = torch.rand(fgraph.num_edges, dtype=torch.float64) + 0.1
    return *pair("GCNConv", width_in, width_out, **kwargs), (weight,) if weighted else ()


def sage(data: st.DataObject, fgraph: FuzzGraph, width_in: int, width_out: int) -> Pair:
    aggr = data.draw(st.sampled_from(["mean", "sum", "max", "min"]), label="aggr")
    kwargs = flags(data, "normalize", "root_weight", "project", "bias")
    return *pair("SAGEConv", width_in, width_out, aggr=aggr, **kwargs), ()


def gat(data: st.DataObject, fgraph: FuzzGraph, width_in: int, width_out: int) -> Pair:
    heads = data.draw(st.integers(1, 3), label="heads")
    slope = data.draw(st.sampled_from([0.2, 0.0, 1.5]), label="negative_slope")
    kwargs = flags(data, "concat", "add_self_loops", "bias", "residual")
    return *pair("GATConv", width_in, width_out, heads=heads, negative_slope=slope, **kwargs), ()


def gin(data: st.DataObject, fgraph: FuzzGraph, width_in: int, width_out: int) -> Pair:
    eps = data.draw(st.sampled_from([0.0, 0.3, -0.5]), label="eps")
    return *pair("GINConv", nn=mlp(data, width_in, width_out), eps=eps, **flags(data, "train_eps")), ()


def agnn(data: st.DataObject, fgraph: FuzzGraph, width_in: int, width_out: int) -> Pair:
    return *pair("AGNNConv", **flags(data, "requires_grad", "add_self_loops")), ()


def edge_conv(data: st.DataObject, fgraph: FuzzGraph, width_in: int, width_out: int) -> Pair:
    aggr = data.draw(st.sampled_from(["max", "min", "add", "mean"]), label="aggr")
    return *pair("EdgeConv", nn=mlp(data, 2 * width_in, width_out), aggr=aggr), ()


LAYERS = {"GCNConv": gcn, "SAGEConv": sage, "GATConv": gat, "GINConv": gin, "AGNNConv": agnn, "EdgeConv": edge_conv}


@pytest.mark.parametrize("name", list(LAYERS))
@fuzz(5)
@given(data=st.data())
def test_layers_match_pyg(name, data):
    fgraph = data.draw(graphs(FULL), label="graph")
    width_in = data.draw(st.sampled_from(WIDTHS), label="in width")
    width_out = data.draw(st.sampled_from(WIDTHS), label="out width")
    seed = data.draw(st.integers(0, 2**31), label="weights seed")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        ours, theirs, args = LAYERS[name](data, fgraph, width_in, width_out)
        for parameter_name, parameter in theirs.named_parameters():
            if parameter_name.endswith("bias"):
                torch.nn.init.normal_(parameter)
        x = torch.randn(fgraph.num_nodes, width_in)
        edge_index = torch.stack([fgraph.src, fgraph.dst])
        assert_matches_pyg(ours, theirs, x, edge_index, *args)
