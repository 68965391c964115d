"""featgraph's ops and layers under torch.autocast: the precision rule table, results against float64 within the
bound bf16 rounding implies, float32 gradients for float32 inputs, and PyG's layers' dtypes."""

import pytest
import torch

import featgraph as fg
from featgraph import ops
from featgraph.operator import graph_args
from tests.conftest import adjacency, random_edges

N, E = 60, 600  # in-degrees up to ~20: sums of many rounded terms
BF16_UNIT = 2.0**-8  # bf16 keeps 8 significant bits: each rounding is within half of this, relative


@pytest.fixture(scope="module")
def edges():
    return random_edges(N, E, seed=5)


@pytest.fixture(scope="module")
def graph(edges):
    return fg.Graph(*edges, N)


def dense(edges, weights: torch.Tensor) -> torch.Tensor:
    """The float64 adjacency A[dst, src] with each edge's weight, duplicates summed."""
    return torch.from_numpy(adjacency(*edges, N, weights.double().detach().numpy()).toarray())


def autocast(dtype: torch.dtype = torch.bfloat16):
    return torch.autocast("cpu", dtype=dtype)


def test_gspmm_runs_in_the_autocast_dtype_within_the_rounding_bound(graph, edges):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, 16, generator=gen, requires_grad=True)
    w = torch.rand(E, generator=gen, requires_grad=True)
    with autocast():
        out = ops.gspmm(graph, "mul", "sum", x, w.unsqueeze(1))
    assert out.dtype == torch.bfloat16
    a = dense(edges, w)
    reference, magnitude = a @ x.double(), a.abs() @ x.double().abs()
    # inputs and output each rounded once (relative 2^-9), the sum accumulated in float32
    bound = 2 * BF16_UNIT * magnitude + BF16_UNIT / 2 * reference.abs() + 1e-6
    assert bool(((out.double() - reference).abs() <= bound).all())
    out.float().pow(2).sum().backward()
    assert x.grad.dtype == torch.float32 and w.grad.dtype == torch.float32
    grad_out = 2 * out.double()  # the gradient's own bf16 kernel: the same bound over the transposed sums
    grad_bound = 2 * BF16_UNIT * (a.abs().t() @ grad_out.abs()) + 1e-6
    assert bool(((x.grad.double() - a.t() @ grad_out).abs() <= grad_bound).all())


def test_gsddmm_dot_runs_in_the_autocast_dtype(graph, edges):
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(N, 32, generator=gen), torch.randn(N, 32, generator=gen)
    with autocast():
        out = ops.gsddmm(graph, "dot", q, k)
    src, dst = (t.long() for t in edges)
    reference = (q.double()[src] * k.double()[dst]).sum(1, keepdim=True)
    magnitude = (q.double()[src] * k.double()[dst]).abs().sum(1, keepdim=True)
    assert out.dtype == torch.bfloat16
    assert bool(((out.double() - reference).abs() <= 2 * BF16_UNIT * magnitude + 1e-6).all())


def test_edge_softmax_runs_in_float32(graph):
    scores = torch.randn(E, 2, dtype=torch.bfloat16)
    with autocast():
        out = ops.edge_softmax(graph, scores)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ops.edge_softmax(graph, scores.float()))


def test_fused_gcn_and_gat_run_in_the_autocast_dtype(graph):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(N, 8, generator=gen, requires_grad=True)
    feat = torch.randn(N, 2, 8, generator=gen, requires_grad=True)
    attn = torch.randn(2, 2, 8, generator=gen, requires_grad=True)
    with autocast():
        gcn = ops.gcn_aggregate(graph, x)
        gat = ops.gat_attention(graph, feat, attn[0], attn[1])
    assert gcn.dtype == gat.dtype == torch.bfloat16
    gcn_reference = ops.gcn_aggregate(graph, x.double())  # float64: not cast
    gat_reference = ops.gat_attention(graph, feat.double(), attn[0].double(), attn[1].double())
    torch.testing.assert_close(gcn.double(), gcn_reference, rtol=4 * BF16_UNIT, atol=4 * BF16_UNIT)
    torch.testing.assert_close(gat.double(), gat_reference, rtol=8 * BF16_UNIT, atol=8 * BF16_UNIT)
    (gcn.float().sum() + gat.float().sum()).backward()
    assert x.grad.dtype == feat.grad.dtype == attn.grad.dtype == torch.float32


def test_float64_inputs_are_left_alone(graph):
    x = torch.randn(N, 4, dtype=torch.float64)
    with autocast():
        assert ops.gspmm(graph, "copy_lhs", "sum", x, None).dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_operators_called_directly_follow_the_table(graph, dtype):
    """The registered operators cast as the op functions do, in whichever dtype the autocast region has."""
    x = torch.randn(N, 4)
    with autocast(dtype):
        out, _ = torch.ops.featgraph.gspmm(*graph_args(graph), "copy_lhs", "sum", x, None, "gar", False)
        probabilities = torch.ops.featgraph.edge_softmax(*graph_args(graph), torch.randn(E, dtype=dtype))
        expected = ops.gspmm(graph, "copy_lhs", "sum", x, None)
    assert out.dtype == dtype and probabilities.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_outside_autocast_nothing_is_cast(graph):
    x = torch.randn(N, 4, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert ops.edge_softmax(graph, torch.randn(E, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert ops.gspmm(graph, "copy_lhs", "sum", x, None).dtype == torch.bfloat16


LAYERS = {
    "GCNConv": lambda d: ((d, 8), {}),
    "SAGEConv": lambda d: ((d, 8), {}),
    "GATConv": lambda d: ((d, 8), {"heads": 2}),
    "GATv2Conv": lambda d: ((d, 8), {"heads": 2}),
    "GINConv": lambda d: ((torch.nn.Linear(d, 8),), {}),
    "GraphConv": lambda d: ((d, 8), {}),
    "SGConv": lambda d: ((d, 8), {}),
    "TransformerConv": lambda d: ((d, 8), {"heads": 2}),
    "EdgeConv": lambda d: ((torch.nn.Linear(2 * d, 8),), {}),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_match_pyg_under_autocast(name, edges):
    """Same weights, same autocast: PyG's values within bf16 rounding, float32 gradients, and the output in
    the autocast dtype (PyG's GCNConv, GATConv and GATv2Conv promote theirs to float32 with their bias)."""
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    import featgraph.nn as fg_nn

    args, kwargs = LAYERS[name](16)
    layer, theirs = getattr(fg_nn, name)(*args, **kwargs), getattr(pyg_nn, name)(*args, **kwargs)
    layer.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 16, generator=torch.Generator().manual_seed(3))
    edge_index = torch.stack(edges)
    with autocast():
        out, expected = layer(x, edge_index), theirs(x, edge_index)
    assert out.dtype == torch.bfloat16
    scale = expected.detach().float().abs().max()
    torch.testing.assert_close(out.float(), expected.float(), rtol=0, atol=16 * BF16_UNIT * float(scale))
    out.float().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in layer.parameters() if p.requires_grad)
