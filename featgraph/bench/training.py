"""``featgraph bench train``: seconds per training epoch (forward + backward + Adam step) and peak memory
of 2-layer GCN, GraphSAGE (mean, max, pool) and GAT (and, with ``--models``, PyG's GraphConv, SGConv, APPNP,
GINEConv, GATv2Conv and TransformerConv: ``LAYER_MODELS``) with featgraph's layers, PyG's layers on ``edge_index``
and on a torch sparse CSR ``adj_t``, and DGL's layers where DGL installs; ratios in the same run. With
``--compile`` also featgraph's and PyG's models under ``torch.compile`` (Inductor; compilation falls in the
warm-up epochs); with ``--bf16`` also featgraph's and PyG's models trained under bf16 autocast (float32 weights
and Adam, features stored in bf16: ``training.loop.MixedPrecision``), their time against float32 featgraph's in
the same run. With ``--torch-dropout`` also featgraph's layers with torch's dropout in place of featgraph's, so
the table separates what the layers buy from what featgraph's dropout buys."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from ..datasets import load, rand100k, reddit_sized
from ..graph import Graph
from ..graph.interop import import_dgl
from ..training import NodeClassifier, preset
from ..training.loop import MixedPrecision
from .measure import peak_extra_mb
from .report import Table, add_common_arguments, device_name, each_graph, machine, run_worker, write_json

IN_FEATURES, CLASSES = 128, 16
GRAPHS: dict[str, Callable[[float], Graph]] = {
    "email-Enron": lambda scale: load("email-Enron").graph,  # the largest real graph available offline
    "rand100k-2.9M": lambda scale: rand100k(scale, 0.06, seed=0),  # skewed: 100k vertices, 2.9M edges
    "reddit-sized": reddit_sized,  # 233k vertices, 115M edges: GPU training's usual graph (--device cuda)
}
CPU_GRAPHS = ("email-Enron", "rand100k-2.9M")
MODELS = {  # bench name: (model, preset overrides)
    "gcn": ("gcn", {"hidden": 128}),
    "sage-mean": ("sage", {"hidden": 128, "aggr": "mean"}),
    "sage-max": ("sage", {"hidden": 128, "aggr": "max"}),
    "sage-pool": ("sage", {"hidden": 128, "aggr": "pool"}),
    "gat": ("gat", {"hidden": 32, "heads": 4}),
}
FRAMEWORKS = ("featgraph", "pyg", "pyg-csr", "dgl")
COMPILABLE = ("featgraph", "pyg", "pyg-csr")
COMPILED = "-compiled"  # a framework name's suffix: its model under torch.compile
BF16 = "-bf16"  # a framework name's suffix: its model trained under bf16 autocast
TORCH_DROPOUT = "-torch-dropout"  # featgraph's suffix: its layers with torch's dropout (what the layers alone buy)


@dataclass
class Row:
    graph: str
    model: str
    framework: str
    ms: float | None  # median epoch
    ratio: float | None = None  # framework ms / featgraph ms
    peak_mb: float | None = None  # training's peak resident memory, one-time preprocessing included
    note: str = ""
    first_ms: float | None = None  # the first epoch: format building, kernel loading and compilation


class DGLNet(torch.nn.Module):
    """The same two-layer models with DGL's layers (GraphConv with self loops, SAGEConv, GATConv)."""

    def __init__(self, dgl, model: str, aggr: str, hidden: int, heads: int, dropout: float) -> None:
        super().__init__()
        layers = dgl.nn.pytorch
        self.model, self.dropout = model, dropout
        if model == "gcn":
            self.conv1, self.conv2 = layers.GraphConv(IN_FEATURES, hidden), layers.GraphConv(hidden, CLASSES)
        elif model == "sage":
            self.conv1 = layers.SAGEConv(IN_FEATURES, hidden, aggr)
            self.conv2 = layers.SAGEConv(hidden, CLASSES, aggr)
        else:
            self.conv1 = layers.GATConv(IN_FEATURES, hidden, heads, attn_drop=dropout)
            self.conv2 = layers.GATConv(hidden * heads, CLASSES, 1, attn_drop=dropout)

    def forward(self, x: torch.Tensor, graph) -> torch.Tensor:
        x = F.dropout(x, self.dropout, self.training)
        h = self.conv1(graph, x).flatten(1)
        h = F.dropout(F.elu(h) if self.model == "gat" else F.relu(h), self.dropout, self.training)
        return self.conv2(graph, h).flatten(1)


# PyG's layers beyond the four above, each a two-layer model (SGC and APPNP as their papers: one SGConv; an MLP
# then APPNP's propagation); GINE's edges carry EDGE_DIM features. DGL's equivalent where dgl.nn has the layer.
LAYER_MODELS = ("graphconv", "sgconv", "appnp", "gine", "gatv2", "transformer")
DGL_LAYERS = {"graphconv", "sgconv", "appnp", "gine", "gatv2"}
EDGE_DIM, LAYER_HIDDEN, LAYER_HEADS = 8, 128, 4


class LayerNet(torch.nn.Module):
    """A two-layer model of one of ``LAYER_MODELS`` from the layer namespace ``nn`` (featgraph.nn or PyG's), with
    the edge features (GINE) kept as a buffer, so it is called as ``net(x, graph)``."""

    def __init__(self, nn, model: str, edge_attr: torch.Tensor | None) -> None:
        super().__init__()
        hidden, heads, linear = LAYER_HIDDEN, LAYER_HEADS, torch.nn.Linear
        self.model, self.convs = model, torch.nn.ModuleList()
        self.register_buffer("edge_attr", edge_attr if model == "gine" else None)
        self.mlp = None
        if model == "graphconv":
            self.convs.extend([nn.GraphConv(IN_FEATURES, hidden), nn.GraphConv(hidden, CLASSES)])
        elif model == "sgconv":
            self.convs.append(nn.SGConv(IN_FEATURES, CLASSES, K=2))
        elif model == "appnp":
            self.mlp = torch.nn.Sequential(linear(IN_FEATURES, hidden), torch.nn.ReLU(), linear(hidden, CLASSES))
            self.convs.append(nn.APPNP(K=10, alpha=0.1))
        elif model == "gine":
            mlp = torch.nn.Sequential(linear(IN_FEATURES, hidden), torch.nn.ReLU(), linear(hidden, hidden))
            self.convs.append(nn.GINEConv(mlp, train_eps=True, edge_dim=EDGE_DIM))
            self.convs.append(nn.GINEConv(linear(hidden, CLASSES), edge_dim=EDGE_DIM))
        else:
            conv = nn.GATv2Conv if model == "gatv2" else nn.TransformerConv
            self.convs.extend([conv(IN_FEATURES, hidden // heads, heads=heads), conv(hidden, CLASSES, heads=1)])

    def forward(self, x: torch.Tensor, graph) -> torch.Tensor:
        if self.mlp is not None:
            x = self.mlp(x)
        extra = {} if self.edge_attr is None else {"edge_attr": self.edge_attr}
        for i, conv in enumerate(self.convs):
            x = conv(x, graph, **extra)
            x = F.relu(x) if i + 1 < len(self.convs) else x
        return x


class DGLLayerNet(torch.nn.Module):
    """``LayerNet``'s models with DGL's layers (on a graph with self loops where PyG's layer adds them: SGConv,
    APPNP, GATv2): GraphConv without normalisation plus a root Linear for PyG's GraphConv, GINEConv after a
    Linear of the edge features (PyG's ``edge_dim``)."""

    def __init__(self, dgl, model: str, edge_attr: torch.Tensor | None) -> None:
        super().__init__()
        layers, linear, hidden, heads = dgl.nn.pytorch, torch.nn.Linear, LAYER_HIDDEN, LAYER_HEADS
        self.model, self.mlp = model, None
        self.register_buffer("edge_attr", edge_attr if model == "gine" else None)
        self.convs, self.roots, self.edge_lins = torch.nn.ModuleList(), torch.nn.ModuleList(), torch.nn.ModuleList()
        if model == "graphconv":
            for width_in, width_out in ((IN_FEATURES, hidden), (hidden, CLASSES)):
                self.convs.append(layers.GraphConv(width_in, width_out, norm="none", bias=True))
                self.roots.append(linear(width_in, width_out, bias=False))
        elif model == "sgconv":
            self.convs.append(layers.SGConv(IN_FEATURES, CLASSES, k=2))
        elif model == "appnp":
            self.mlp = torch.nn.Sequential(linear(IN_FEATURES, hidden), torch.nn.ReLU(), linear(hidden, CLASSES))
            self.convs.append(layers.APPNPConv(k=10, alpha=0.1))
        elif model == "gine":
            mlp = torch.nn.Sequential(linear(IN_FEATURES, hidden), torch.nn.ReLU(), linear(hidden, hidden))
            self.convs.extend([layers.GINEConv(mlp, learn_eps=True), layers.GINEConv(linear(hidden, CLASSES))])
            self.edge_lins.extend([linear(EDGE_DIM, IN_FEATURES), linear(EDGE_DIM, hidden)])
        else:
            self.convs.extend(
                [layers.GATv2Conv(IN_FEATURES, hidden // heads, heads), layers.GATv2Conv(hidden, CLASSES, 1)]
            )

    def forward(self, x: torch.Tensor, graph) -> torch.Tensor:
        if self.mlp is not None:
            x = self.mlp(x)
        for i, conv in enumerate(self.convs):
            if self.model == "gine":
                out = conv(graph, x, self.edge_lins[i](self.edge_attr))
            elif self.model == "graphconv":
                out = conv(graph, x) + self.roots[i](x)
            else:
                out = conv(graph, x).flatten(1)
            x = F.relu(out) if i + 1 < len(self.convs) else out
        return x


def _setups(
    g: Graph, bench_model: str, frameworks: list[str], dropout: str | None = None
) -> dict[str, tuple[torch.nn.Module, object] | str]:
    """Per framework: (model, graph argument), or why it is not run. featgraph's layers take its Graph (the
    formats derived from it count, as DGL's from its DGLGraph), PyG's ``edge_index`` or a CSR ``adj_t``;
    featgraph's model has ``dropout``'s dropout ("torch", or by default its own)."""
    return {framework: _setup(g, bench_model, framework, dropout) for framework in frameworks}


def _setup(g: Graph, bench_model: str, framework: str, dropout: str | None) -> tuple[torch.nn.Module, object] | str:
    layered = bench_model in LAYER_MODELS
    if layered and dropout is not None:
        return "n/a: this model has no dropout"
    model, overrides = (bench_model, {}) if layered else MODELS[bench_model]
    config = None if layered else preset(model, **overrides)
    edge_attr = torch.randn(g.num_edges, EDGE_DIM, generator=torch.Generator().manual_seed(1)) if layered else None
    if framework == "featgraph":
        if not layered:
            return NodeClassifier(model, IN_FEATURES, CLASSES, config, "featgraph", dropout), g
        import featgraph.nn as fgnn

        return LayerNet(fgnn, bench_model, edge_attr), g
    if framework in ("pyg", "pyg-csr"):
        if framework == "pyg-csr" and bench_model == "gine":
            return "n/a: PyG's GINEConv takes no edge features with a sparse adj_t"
        try:
            if layered:
                import torch_geometric.nn as pyg_nn

                net = LayerNet(pyg_nn, bench_model, edge_attr)
            else:
                net = NodeClassifier(model, IN_FEATURES, CLASSES, config, "pyg")
        except ImportError:
            return "PyG not installed"
        return net, torch.stack(g.coo()) if framework == "pyg" else g.adjacency()
    dgl = import_dgl()
    if dgl is None:
        return "DGL not installed"
    if layered and bench_model not in DGL_LAYERS:
        return "n/a: DGL has no such layer"
    if not layered and model == "sage" and config.aggr == "max":
        return "DGL's SAGEConv has no plain max aggregator (see sage-pool)"
    dg = dgl.graph(g.coo(), num_nodes=g.num_nodes)
    # self loops as edges where PyG's layer adds them (SGConv, APPNP, GATv2) and as DGL's GCN and GAT examples do
    if model in ("sgconv", "appnp", "gatv2", "gcn", "gat"):
        dg = dgl.add_self_loop(dgl.remove_self_loop(dg))
    if layered:
        return DGLLayerNet(dgl, bench_model, edge_attr), dg
    return DGLNet(dgl, model, config.aggr, config.hidden, config.heads, config.dropout), dg


def epoch_ms(
    net: torch.nn.Module, graph: object, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
    repeat: int, precision: MixedPrecision | None = None,
) -> tuple[float, float]:  # fmt: skip
    """(first epoch's ms, median ms per epoch over ``repeat`` epochs after two warm-up epochs), the forward and
    loss in ``precision`` (float32 by default); on a GPU each epoch is timed to the end of its queued work."""
    net.train()
    precision = precision or MixedPrecision(device_type=x.device.type)
    sync = torch.cuda.synchronize if x.device.type == "cuda" else (lambda: None)
    times = []
    for _ in range(2 + repeat):
        sync()
        start = time.perf_counter()
        optimizer.zero_grad()
        with precision.autocast():
            loss = F.cross_entropy(net(x, graph), y)
        precision.step(loss, optimizer)
        sync()
        times.append(time.perf_counter() - start)
    return times[0] * 1e3, statistics.median(times[2:]) * 1e3


@dataclass
class Prepared:
    """A row's model on its device, with what it trains on: the graph argument, features, labels, optimizer
    and precision."""

    net: torch.nn.Module
    graph: object
    optimizer: torch.optim.Optimizer
    x: torch.Tensor
    y: torch.Tensor
    precision: MixedPrecision

    def epochs_ms(self, repeat: int) -> tuple[float, float]:
        """``epoch_ms`` of this model: (first epoch's ms, median of ``repeat`` after two warm-up epochs)."""
        return epoch_ms(self.net, self.graph, self.optimizer, self.x, self.y, repeat, self.precision)


def prepare(graph_name: str, scale: float, bench_model: str, framework: str, device: str) -> Prepared | str:
    """``framework``'s model of ``bench_model`` on the graph and its inputs, on ``device`` (compiled or in bf16
    as its name's suffix says), or why it is not run."""
    where = torch.device(device)
    base = framework.removesuffix(BF16).removesuffix(COMPILED).removesuffix(TORCH_DROPOUT)
    if base == "dgl" and where.type != "cpu":
        return f"not run on {where.type}: DGL's CPU build"
    g = GRAPHS[graph_name](scale).to(where)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(g.num_nodes, IN_FEATURES, generator=gen).to(where)
    y = torch.randint(0, CLASSES, (g.num_nodes,), generator=gen).to(where)
    precision = MixedPrecision("bf16" if framework.endswith(BF16) else "fp32", where.type)
    x = precision.features(x)
    setup = _setups(g, bench_model, [base], "torch" if TORCH_DROPOUT in framework else None)[base]
    if isinstance(setup, str):
        return setup
    net = setup[0].to(where)
    if framework.removesuffix(BF16).endswith(COMPILED):
        net = torch.compile(net)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)  # before the baseline: it imports torch._dynamo
    return Prepared(net, setup[1], optimizer, x, y, precision)


def run_one(graph_name: str, scale: float, bench_model: str, framework: str, repeat: int, device: str = "cpu") -> Row:
    """One row, meant for a fresh process. ``peak_mb``: the high-water mark over the whole training (warm-up,
    format building and kernel loading included) above the resident size once graph, features and model
    exist, on a GPU above the memory allocated there. (A per-epoch figure over what stays resident would
    mostly measure how much freed memory each allocator pattern keeps mapped, so it is not reported.)"""
    prepared = prepare(graph_name, scale, bench_model, framework, device)
    if isinstance(prepared, str):
        return Row(graph_name, bench_model, framework, None, note=prepared)
    result: dict[str, float] = {}
    try:
        peak = peak_extra_mb(
            lambda: result.update(zip(("first_ms", "ms"), prepared.epochs_ms(repeat), strict=True)),
            torch.device(device),
        )
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as err:  # a baseline path that fails
        return Row(graph_name, bench_model, framework, None, note=f"failed: {str(err)[:80]}")
    return Row(graph_name, bench_model, framework, result["ms"], peak_mb=peak, first_ms=result["first_ms"])


def run_rows(
    graph_name: str, scale: float, bench_model: str, frameworks: list[str], repeat: int, device: str = "cpu"
) -> list[Row]:
    """Each framework in its own process (clean peak memory, no allocator caches shared between them)."""
    rows = []
    for framework in frameworks:
        row = run_worker("featgraph.bench.training", [graph_name, scale, bench_model, framework, repeat, device])
        rows.append(Row(graph_name, bench_model, framework, None, note=row) if isinstance(row, str) else Row(**row))
    base = next((r.ms for r in rows if r.framework == "featgraph" and r.ms), None)
    for r in rows:
        r.ratio = r.ms / base if base and r.ms else None
    return rows


TABLE = Table({
    "graph": "graph", "model": "model", "framework": "framework", "ms/epoch": "ms:.1f", "time / featgraph": "ratio:.2f",
    "first epoch ms": "first_ms:.0f", "peak MB": "peak_mb:.0f", "note": "note",
})  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graphs", nargs="+", default=list(CPU_GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=[*MODELS, *LAYER_MODELS])
    parser.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=list(FRAMEWORKS))
    add_common_arguments(parser, repeat=3, scale=1.0, scale_help="shrink the synthetic graph (tests)")
    parser.add_argument("--device", default="cpu", help="where the models train: cpu (default) or cuda")
    parser.add_argument(
        "--compile", action="store_true", help="add rows for featgraph's and PyG's models under torch.compile"
    )
    parser.add_argument(
        "--bf16", action="store_true", help="add rows for featgraph's and PyG's models trained under bf16 autocast"
    )
    parser.add_argument(
        "--torch-dropout", action="store_true", help="add a row for featgraph's layers with torch's dropout"
    )


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}; device: {device_name(args.device)}; input features {IN_FEATURES}, classes {CLASSES}")
    rows: list[Row] = []
    frameworks = list(args.frameworks)
    if args.compile:
        frameworks += [f + COMPILED for f in args.frameworks if f in COMPILABLE]
    if args.bf16:
        frameworks += [f + BF16 for f in args.frameworks if f in ("featgraph", "pyg")]
    if args.torch_dropout and "featgraph" in args.frameworks:
        frameworks.insert(frameworks.index("featgraph") + 1, "featgraph" + TORCH_DROPOUT)
    for graph_name, _ in each_graph(args.graphs, GRAPHS, args.scale, TABLE.header):
        for bench_model in args.models:
            batch = run_rows(graph_name, args.scale, bench_model, frameworks, args.repeat, args.device)
            print(TABLE.rows(batch), flush=True)
            rows += batch
    write_json(args.json, [asdict(r) for r in rows], device=device_name(args.device))
    return rows


if __name__ == "__main__":  # the worker: one row as JSON on the last line of stdout
    print(json.dumps(asdict(run_one(*json.loads(sys.argv[1])))))
