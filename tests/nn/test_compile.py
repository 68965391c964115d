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


def compiled_matches_eager(layer: torch.nn.Module, x: torch.Tensor, *args) -> None:
    """The layer compiled with ``fullgraph=True`` (no graph break) gives eager's output and x's gradient."""
    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = torch.compile(layer, backend="aot_eager", fullgraph=True)(x_compiled, *args)
    expected = layer(x_eager, *args)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x_compiled.grad, x_eager.grad)


def layer_case(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A layer and its arguments after (x, graph): edge features of 4 for the layers taking them."""
    torch.manual_seed(0)
    edge_attr = (torch.randn(E, 4),)
    mlp = torch.nn.Linear(2 * FEATURES, FEATURES)
    return {
        "gine": (fg.nn.GINEConv(torch.nn.Linear(FEATURES, FEATURES), edge_dim=4), edge_attr),
        "gatv2-edge-features": (fg.nn.GATv2Conv(FEATURES, 3, heads=2, add_self_loops=False, edge_dim=4), edge_attr),
        "transformer": (fg.nn.TransformerConv(FEATURES, 3, heads=2, edge_dim=4), edge_attr),
        "graph-conv": (fg.nn.GraphConv(FEATURES, 3, aggr="mean"), ()),
        "sg-conv": (fg.nn.SGConv(FEATURES, 3, K=2), ()),
        "appnp": (fg.nn.APPNP(K=3, alpha=0.1), ()),
        "edge-conv-sum": (fg.nn.EdgeConv(torch.nn.Sequential(mlp, torch.nn.ReLU()), aggr="add"), ()),
        "edge-conv-mean": (fg.nn.EdgeConv(mlp, aggr="mean"), ()),
        "edge-conv-max": (fg.nn.EdgeConv(mlp, aggr="max"), ()),  # reads in-degrees
        "gatv2-looped": (fg.nn.GATv2Conv(FEATURES, 3, heads=2), ()),
        "agnn": (fg.nn.AGNNConv(), ()),
        "gcn-unnormalized": (fg.nn.GCNConv(FEATURES, 3, normalize=False), ()),  # as in PyG's compile/gcn.py
    }[name]


EDGE_FEATURE_LAYERS = ("gine", "gatv2-edge-features", "transformer")
OTHER_LAYERS = (
    "graph-conv", "sg-conv", "appnp", "edge-conv-sum", "edge-conv-mean", "edge-conv-max", "gcn-unnormalized",
)  # fmt: skip


@pytest.mark.parametrize(
    "name,graph_input",
    [(name, given) for name in EDGE_FEATURE_LAYERS for given in ("graph", "edge_index")]
    + [(name, "edge_index") for name in OTHER_LAYERS],
)
def test_layers_compile_without_graph_breaks(data, name, graph_input):
    """The fused attention and edge-feature kernels (GINE, GATv2, Transformer) and EdgeConv's fused message
    sum run as featgraph operators in traced code, as the other layers' ops do."""
    edge_index, x, _ = data
    edges = fg.Graph.from_edge_index(edge_index, num_nodes=N) if graph_input == "graph" else edge_index
    layer, args = layer_case(name)
    compiled_matches_eager(layer, x, edges, *args)


@pytest.mark.parametrize("name,graph_input", [("gatv2-looped", "graph"), ("agnn", "edge_index")])
def test_per_edge_data_of_a_looped_graph_compiles_with_dynamic_output_shapes(data, name, graph_input):
    """GATv2's and AGNN's per-edge scores live on the graph with self loops added: its edge count (edges
    less the loops they hold, plus one per vertex) depends on the edges' values, a size the operator knows
    only when it runs, which Dynamo takes with capture_dynamic_output_shape_ops."""
    edge_index, x, _ = data
    edges = fg.Graph.from_edge_index(edge_index, num_nodes=N) if graph_input == "graph" else edge_index
    layer, args = layer_case(name)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled_matches_eager(layer, x, edges, *args)


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


def test_pyg_style_mini_batches_outside_the_compiled_model_do_not_recompile():
    """PyG's pattern: the loader runs outside the compiled model (so tracing never enters the sampler) and
    hands it each batch as one flat edge_index over the sampled vertices (``MiniBatch.to_edge_index``, the
    layout of PyG's NeighborLoader); with ``dynamic=True`` the varying sizes compile at most once more."""
    graph = fg.Graph(*random_edges(300, 2000, seed=6), 300)
    gen = torch.Generator().manual_seed(4)
    features, labels = torch.randn(300, FEATURES, generator=gen), torch.randint(0, CLASSES, (300,), generator=gen)
    net = model("sage")
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(net, backend=counter, dynamic=True, fullgraph=True)
    sampler = fg.sampling.NeighborSampler(graph, [4, 3])
    frames = []
    for step, size in enumerate((40, 53, 61, 47, 70)):
        batch = sampler.sample(torch.randperm(300, generator=gen)[:size], seed=step).to_edge_index()
        x = features[batch.n_id]
        out = compiled(x, batch.edge_index)[: batch.batch_size]
        F.cross_entropy(out, labels[batch.n_id[: batch.batch_size]]).backward()
        frames.append(counter.frame_count)
    net.eval()
    torch.testing.assert_close(compiled(x, batch.edge_index), net(x, batch.edge_index))
    assert frames[-1] - frames[0] <= 1


@pytest.mark.parametrize("name", ["gcn", "gine"])
def test_gpu_target_kernels_run_inside_the_compiled_operators(data, name, gpu):
    """The Triton kernels (on a GPU, or under Triton's interpreter on CPU tensors) run inside featgraph's
    operators, which the compiled graph calls as opaque kernels: the compiled model matches eager there too."""
    edge_index, x, _ = data
    layer, args = (fg.nn.GCNConv(FEATURES, 3), ()) if name == "gcn" else layer_case("gine")
    with fg.default_target("gpu"):
        compiled_matches_eager(layer.to(gpu), x.to(gpu), edge_index.to(gpu), *(a.to(gpu) for a in args))


@pytest.mark.parametrize("name", ["gcn", "sage", "gat"])
def test_models_compile_with_inductor_on_the_gpu_without_breaks(data, name, cuda):
    """On a CUDA device, Inductor's own code around featgraph's operators: no graph break, eager's outputs
    and gradients, no recompilation across training steps."""
    edge_index, x, y = (t.to(cuda) for t in data)
    net = model(name).to(cuda)
    explained = torch._dynamo.explain(net)(x, edge_index)
    assert explained.graph_break_count == 0, explained.break_reasons
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(net, backend=counter, fullgraph=True)
    net.eval()
    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    F.cross_entropy(net(x_eager, edge_index), y).backward()
    out = compiled(x_compiled, edge_index)
    F.cross_entropy(out, y).backward()
    torch.testing.assert_close(out, net(x, edge_index), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(x_compiled.grad, x_eager.grad, rtol=1e-4, atol=1e-5)
    net.train()
    for _ in range(3):
        F.cross_entropy(compiled(x, edge_index), y).backward()
    assert counter.frame_count == 2  # eval and training: none again across steps


def test_compiled_attention_layers_report_bad_edge_features_as_eager_does(data):
    """Shape errors are raised while tracing, so Dynamo runs the call eagerly and the caller gets the eager
    error (with ``fullgraph=True``, Dynamo's own error quoting it)."""
    edge_index, x, _ = data
    layer, (edge_attr,) = layer_case("gine")
    compiled = torch.compile(layer, backend="aot_eager")
    for bad, message in ((edge_attr[:-3], f"edge_attr: expected {E} rows"), (edge_attr[:, :2], "weight: expected")):
        with pytest.raises(ValueError, match=message):
            layer(x, edge_index, bad)
        with pytest.raises(ValueError, match=message):
            compiled(x, edge_index, bad)


def test_a_compiled_step_that_samples_runs_the_sampler_eagerly():
    """torch.compile never traces into the sampler (its blocks are Graphs of data-dependent sizes): a step
    that samples runs it eagerly and compiles the model after it into one graph."""
    graph = fg.Graph(*random_edges(300, 2000, seed=5), 300)
    x = torch.randn(300, FEATURES, generator=torch.Generator().manual_seed(2))
    sampler = fg.sampling.NeighborSampler(graph, [4, 4])
    torch.manual_seed(0)
    net = SampledClassifier("sage", FEATURES, CLASSES, 2, minibatch_preset("sage", hidden=8), "featgraph").eval()

    def step(seeds: torch.Tensor, seed: int) -> torch.Tensor:
        batch = sampler.sample(seeds, seed)
        return net(x[batch.input_nodes], batch.blocks)

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(step, backend=counter, dynamic=True)
    for size, seed in ((60, 3), (45, 4), (52, 5)):
        torch.testing.assert_close(compiled(torch.arange(size), seed), step(torch.arange(size), seed))
    assert counter.frame_count <= 2  # the model, recompiled at most once; traced into, the sampler made many
