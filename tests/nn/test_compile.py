"""Models built from featgraph's layers under ``torch.compile``: no graph breaks (``fullgraph=True``), no
recompilation across training epochs, at most one across graphs of varying sizes with ``dynamic=True``,
and the same outputs and gradients as eager; ``torch.export`` of an inference model gives a program that
runs."""

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounterWithBackend

import featgraph as fg
from featgraph.loader import BlockLoader
from featgraph.training.minibatch import SampledClassifier, minibatch_preset
from featgraph.training.models import NodeClassifier, preset
from tests.conftest import random_edges

N, E, FEATURES, CLASSES = 40, 200, 6, 3


@pytest.fixture(scope="module")
def data():
    edge_index = torch.stack(random_edges(N, E, seed=8))
    gen = torch.Generator().manual_seed(1)
    return edge_index, torch.randn(N, FEATURES, generator=gen), torch.randint(0, CLASSES, (N,), generator=gen)


def model(name: str) -> NodeClassifier:
    torch.manual_seed(0)
    return NodeClassifier(name, FEATURES, CLASSES, preset(name), "featgraph")


@pytest.mark.parametrize(
    "name,graph_input", [("gcn", "graph"), ("gcn", "edge_index"), ("sage", "edge_index"), ("gat", "graph")]
)
def test_compiled_training_has_no_breaks_or_recompiles(data, name, graph_input):
    edge_index, x, y = data
    edges = fg.Graph.from_edge_index(edge_index, num_nodes=N) if graph_input == "graph" else edge_index
    net = model(name)
    explained = torch._dynamo.explain(net)(x, edges)
    assert explained.graph_break_count == 0, explained.break_reasons
    counter = CompileCounterWithBackend("aot_eager")  # AOT autograd over the fake implementations
    compiled = torch.compile(net, backend=counter, fullgraph=True)
    net.eval()  # eval first: no dropout, so compiled and eager agree exactly
    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    F.cross_entropy(net(x_eager, edges), y).backward()
    out = compiled(x_compiled, edges)
    F.cross_entropy(out, y).backward()
    torch.testing.assert_close(out, net(x, edges))
    torch.testing.assert_close(x_compiled.grad, x_eager.grad)
    net.train()
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(3):
        optimizer.zero_grad()
        F.cross_entropy(compiled(x, edges), y).backward()
        optimizer.step()
    assert counter.frame_count == 2  # one graph for eval, one for training: none again across epochs


@pytest.mark.parametrize("graph_input", ["graph", "edge_index"])
def test_varying_graph_sizes_recompile_at_most_once(graph_input):
    counter = CompileCounterWithBackend("aot_eager")
    net = model("sage").eval()
    compiled = torch.compile(net, backend=counter, dynamic=True, fullgraph=True)
    first = None
    for n, e in ((30, 150), (45, 260), (52, 300), (61, 333)):
        edge_index = torch.stack(random_edges(n, e, seed=n))
        edges = fg.Graph.from_edge_index(edge_index, num_nodes=n) if graph_input == "graph" else edge_index
        x = torch.randn(n, FEATURES, requires_grad=True)
        out = compiled(x, edges)
        out.sum().backward()
        torch.testing.assert_close(out, net(x, edges))
        first = first or counter.frame_count
    assert counter.frame_count - first <= 1


@pytest.mark.parametrize("name", ["sage", "gat"])
def test_mini_batches_of_varying_sizes_do_not_recompile(name):
    graph = fg.Graph(*random_edges(300, 2000, seed=5), 300)
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(300, FEATURES, generator=gen), torch.randint(0, CLASSES, (300,), generator=gen)
    torch.manual_seed(0)
    net = SampledClassifier(name, FEATURES, CLASSES, 2, minibatch_preset(name, hidden=8, heads=2), "featgraph")
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(net, backend=counter, dynamic=True, fullgraph=True)
    frames = []
    for batch in BlockLoader(graph, [4, 4], batch_size=53, x=x, y=y):  # blocks of varying sizes
        F.cross_entropy(compiled(batch.x, batch.blocks), batch.y).backward()
        frames.append(counter.frame_count)
    assert len(frames) > 3 and frames[-1] - frames[0] <= 1


@pytest.mark.parametrize("graph_input", ["graph", "edge_index"])
def test_layers_reading_degrees_or_looped_edge_data_compile(data, graph_input):
    """EdgeConv (max) reads in-degrees; AGNN's per-edge scores live on the looped graph, whose edge count the
    operator knows only when it runs (a size Dynamo takes with capture_dynamic_output_shape_ops)."""
    edge_index, x, _ = data
    edges = fg.Graph.from_edge_index(edge_index, num_nodes=N) if graph_input == "graph" else edge_index
    torch.manual_seed(0)
    layers = [fg.nn.EdgeConv(torch.nn.Linear(2 * FEATURES, FEATURES), aggr="max"), fg.nn.AGNNConv()]
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        for layer in layers:
            x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
            out = torch.compile(layer, backend="aot_eager", fullgraph=True)(x_compiled, edges)
            expected = layer(x_eager, edges)
            torch.testing.assert_close(out, expected)
            out.sum().backward()
            expected.sum().backward()
            torch.testing.assert_close(x_compiled.grad, x_eager.grad)


def test_exported_inference_model_runs(data):
    edge_index, x, _ = data
    net = model("gcn").eval()
    program = torch.export.export(net, (x, edge_index))
    torch.testing.assert_close(program.module()(x, edge_index), net(x, edge_index))


def test_compiled_model_reports_bad_edges_as_eager_does(data):
    _, x, _ = data
    compiled = torch.compile(model("sage").eval(), backend="aot_eager", fullgraph=True)
    bad = torch.tensor([[0, N + 5], [1, 2]])
    with pytest.raises(ValueError, match=f"edge_index: node id {N + 5} out of range"):
        compiled(x, bad)
