"""``featgraph bench hetero``: relational layers' forward + backward on typed graphs, in the same run with
the same weights.

- ``--layer rgcn`` (default): featgraph's ``RGCNConv`` (its ``relational_aggregate`` choosing transform-first
  or aggregate-first) and its fused-UDF way against PyG's ``RGCNConv`` (a loop over relations) and
  ``FastRGCNConv`` (an (E, in, out) weight per edge).
- ``--layer rgat``: featgraph's ``RGATConv`` against PyG's (an (E, in, heads x out) weight per edge), both
  attention mechanisms, ``--heads`` heads.
- ``--layer hgt``: featgraph's ``HGTConv`` against PyG's (loops over node and edge types), ``--heads`` heads,
  ``--channels`` random features for every node type.
- ``--layer heteroconv``: PyG's ``HeteroConv`` of a ``SAGEConv`` (mean) per edge type, summed, as built and
  after ``featgraph.nn.accelerate`` (each destination type's relations one typed call), and DGL's
  ``HeteroGraphConv`` of its ``SAGEConv`` with the same weights where DGL imports; ``--channels`` random
  features for every node type.

Graphs: synthetic typed graphs of 3 node types and 10 or 50 relations (relation sizes skewed, as real
knowledge graphs' are), an AIFB-like one (one node type, 90 relations, AIFB's node and edge counts) and
ogbn-mag's shape at ``--mag-scale`` (``datasets.mag_like``, its four edge types and their reverses). PyG's
per-edge weights are skipped where they would exceed ``--fast-max-gb``.

``--device cuda`` runs every row on the GPU (graphs, features and layers there, featgraph's layers on its GPU
kernels; DGL's layers are left out, its build being CPU-only), each run timed to the end of its GPU work; an
implementation that runs out of GPU memory is left out of its row, which says so in its note.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ..datasets.planted import mag_like, relation_sizes
from ..graph import HeteroGraph
from ..graph.hetero import with_reverse_edges
from ..graph.interop import import_dgl
from ..timing import interleaved_best_ms
from .kernels import ForwardBackward
from .report import cell, device_name, machine, markdown_header, markdown_row, write_json

# name: (node types' counts, relations, edges) at scale 1
GRAPHS = {
    "3 types, 10 relations": ((20_000, 20_000, 10_000), 10, 100_000),
    "3 types, 50 relations": ((20_000, 20_000, 10_000), 50, 100_000),
    "AIFB-like, 90 relations": ((8_285,), 90, 58_086),
}
IMPLEMENTATIONS = ("featgraph", "featgraph fused", "PyG RGCNConv", "PyG FastRGCNConv")
OUT_OF_MEMORY = "out of GPU memory"


@dataclass
class Row:
    graph: str
    nodes: int
    edges: int
    relations: int
    channels: int
    featgraph_ms: float | None  # None (all four): out of GPU memory, as the note says
    featgraph_fused_ms: float | None
    pyg_rgcn_ms: float | None
    pyg_fast_rgcn_ms: float | None  # None: skipped (its per-edge weight over --fast-max-gb)
    rgcn_over_featgraph: float | None
    fast_rgcn_over_featgraph: float | None
    note: str = ""


def typed_graph(counts: tuple[int, ...], relations: int, edges: int, seed: int = 0) -> HeteroGraph:
    """A seeded typed graph: relation ``r`` joins two random node types, its share of the edges falling off
    as ``1 / (r + 1)`` (a few large relations, many small ones), endpoints uniform within their types."""
    gen = torch.Generator().manual_seed(seed)
    types = [f"t{i}" for i in range(len(counts))]
    sizes = relation_sizes(relations, edges)
    data = {}
    for r, size in enumerate(sizes.tolist()):
        src_type, dst_type = (int(t) for t in torch.randint(0, len(counts), (2,), generator=gen))
        src = torch.randint(0, counts[src_type], (size,), generator=gen)
        dst = torch.randint(0, counts[dst_type], (size,), generator=gen)
        data[(types[src_type], f"r{r}", types[dst_type])] = (src, dst)
    return HeteroGraph(data, dict(zip(types, counts, strict=True)))


@dataclass
class AttentionRow:
    graph: str
    nodes: int
    edges: int
    relations: int
    channels: int
    mechanism: str
    featgraph_ms: float | None  # None: out of GPU memory, as the note says
    pyg_ms: float | None  # None: skipped (its per-edge weight over --fast-max-gb), or out of GPU memory
    pyg_over_featgraph: float | None
    dgl_ms: float | None = None  # heteroconv's DGL HeteroGraphConv, where DGL imports (on the CPU)
    dgl_over_featgraph: float | None = None
    note: str = ""


def mag_graph(scale: float) -> HeteroGraph:
    """``mag_like`` at ``scale`` with every edge type also reversed, as PyG's ``ToUndirected`` makes it."""
    typed = mag_like(scale).graph
    return HeteroGraph(with_reverse_edges(typed.to_edge_index_dict()), typed.num_nodes_dict)


def on_device(hg: HeteroGraph, device: torch.device) -> HeteroGraph:
    """``hg`` with its edges on ``device``: the same node and edge types, edges in the same order."""
    if hg.device == device:
        return hg
    return HeteroGraph({et: edges.to(device) for et, edges in hg.to_edge_index_dict().items()}, hg.num_nodes_dict)


def graphs(scale: float, mag_scale: float, device: torch.device) -> dict[str, HeteroGraph]:
    """The bench's typed graphs on ``device``, node and edge counts times ``scale`` (mag-like: ``mag_scale``)."""
    out = {}
    for name, (counts, relations, edges) in GRAPHS.items():
        counts = tuple(max(1, int(n * scale)) for n in counts)
        out[name] = typed_graph(counts, relations, max(1, int(edges * scale)))
    out[f"mag-like-{mag_scale:g}, 8 relations"] = mag_graph(mag_scale)
    return {name: on_device(hg, device) for name, hg in out.items()}


def dgl_on(device: torch.device) -> Any | None:
    """DGL where it imports and ``device`` is the CPU (its build is CPU-only), else None."""
    return import_dgl() if device.type == "cpu" else None


def best_times(steps: Mapping[str, Callable[[], object]], repeat: int) -> tuple[dict[str, float], dict[str, str]]:
    """``interleaved_best_ms`` of the steps, and why any step has no time: each step is warmed up on its own
    first, and one that runs out of GPU memory there (or all, where that happens while they take turns) is
    left out, so the others of its row are still timed."""
    failed: dict[str, str] = {}
    for name, step in steps.items():
        try:
            step()
        except torch.OutOfMemoryError:
            failed[name] = OUT_OF_MEMORY
    fitting = {name: step for name, step in steps.items() if name not in failed}
    try:
        return interleaved_best_ms(fitting, repeat, warmup=0), failed
    except torch.OutOfMemoryError:
        return {}, {**failed, **dict.fromkeys(fitting, OUT_OF_MEMORY)}


def over(ms: float | None, base: float | None) -> float | None:
    """``ms / base``, or None where either time is missing."""
    return None if ms is None or not base else ms / base


def time_cell(ms: float | None, why: str | None = None) -> str:
    """A time's cell: the milliseconds, or why there are none."""
    return why if ms is None and why else cell(ms, ".1f")


def ratio_cell(ratio: float | None) -> str:
    """A ratio's cell: "2.5x", or "-" where there is none."""
    return "-" if ratio is None else f"{ratio:.1f}x"


def failure_note(failed: Mapping[str, str]) -> str:
    """A row's note: each implementation without a time, and why."""
    return "; ".join(f"{name}: {why}" for name, why in failed.items())


Case = tuple[str, dict[str, ForwardBackward], str | None]  # (mechanism, steps by implementation, why PyG's is left out)


def rgat_cases(hg: HeteroGraph, args: argparse.Namespace) -> list[Case]:
    """RGATConv's two attention mechanisms on ``hg``'s homogeneous view; PyG's left out where its per-edge weight
    would exceed ``--fast-max-gb``."""
    from torch_geometric.nn import RGATConv as PygRGATConv

    from ..nn import RGATConv

    d, heads, relations = args.channels, args.heads, hg.num_relations
    x = torch.randn(hg.num_nodes, d, device=hg.device, requires_grad=True)
    edge_index, edge_type = hg.graph.edge_index, hg.etype
    pyg_gb = hg.num_edges * d * heads * d * x.element_size() / 2**30
    cases = []
    for mechanism in ("across-relation", "within-relation"):
        torch.manual_seed(0)
        pyg = PygRGATConv(d, d, relations, heads=heads, attention_mechanism=mechanism)
        ours = RGATConv(d, d, relations, heads=heads, attention_mechanism=mechanism)
        ours.load_state_dict(pyg.state_dict())
        pyg, ours = pyg.to(hg.device), ours.to(hg.device)
        steps = {"featgraph": layer_step(ours, x, edge_index, edge_type)}
        skipped = f"{pyg_gb:.1f} GB per-edge weight"
        if pyg_gb <= args.fast_max_gb:
            steps["PyG"], skipped = layer_step(pyg, x, edge_index, edge_type), None
        cases.append((mechanism, steps, skipped))
    return cases


def hgt_cases(hg: HeteroGraph, args: argparse.Namespace) -> list[Case]:
    """HGTConv (its softmax across each destination's edge types) on ``hg``'s ``x_dict`` and ``edge_index_dict``,
    every node type with ``--channels`` random features."""
    from torch_geometric.nn import HGTConv as PygHGTConv

    from ..nn import HGTConv

    d = args.channels
    x_dict = {t: torch.randn(n, d, device=hg.device, requires_grad=True) for t, n in hg.num_nodes_dict.items()}
    edges = hg.to_edge_index_dict()
    torch.manual_seed(0)
    pyg = PygHGTConv(d, d, (list(hg.node_types), list(hg.edge_types)), heads=args.heads)
    ours = HGTConv(d, d, (list(hg.node_types), list(hg.edge_types)), heads=args.heads)
    ours.load_state_dict(pyg.state_dict())
    pyg, ours = pyg.to(hg.device), ours.to(hg.device)

    def step(layer: torch.nn.Module) -> ForwardBackward:
        leaves = [*x_dict.values(), *layer.parameters()]
        return ForwardBackward(lambda: torch.cat(list(layer(x_dict, edges).values())), leaves)

    return [("across-relation", {"featgraph": step(ours), "PyG": step(pyg)}, None)]


def heteroconv_cases(hg: HeteroGraph, args: argparse.Namespace) -> list[Case]:
    """PyG's ``HeteroConv`` of ``SAGEConv`` per edge type (sum over relations) on ``hg``'s ``x_dict`` and
    ``edge_index_dict``, every node type with ``--channels`` random features: as PyG builds it and accelerated."""
    import copy

    from torch_geometric.nn import HeteroConv, SAGEConv

    from ..nn import accelerate

    d = args.channels
    x_dict = {t: torch.randn(n, d, device=hg.device, requires_grad=True) for t, n in hg.num_nodes_dict.items()}
    edges = hg.to_edge_index_dict()
    torch.manual_seed(0)
    pyg = HeteroConv({et: SAGEConv((d, d), d) for et in hg.edge_types}, aggr="sum").to(hg.device)
    ours = copy.deepcopy(pyg)
    accelerate(ours)

    def step(layer: torch.nn.Module, *graph: object) -> ForwardBackward:
        def forward() -> torch.Tensor:  # DGL's outputs come in its node types' order, PyG's in its layers'
            out = layer(*graph, x_dict) if graph else layer(x_dict, edges)
            return torch.cat([out[t] for t in sorted(out)])

        return ForwardBackward(forward, [*x_dict.values(), *layer.parameters()])

    steps = {"featgraph": step(ours), "PyG": step(pyg)}
    dgl = dgl_on(hg.device)
    if dgl is not None:  # DGL's HeteroGraphConv of its SAGEConv (mean), PyG's weights
        dgl_graph = dgl.heterograph({et: tuple(hg.relation(et).coo()) for et in hg.edge_types}, hg.num_nodes_dict)
        dgl_layer = dgl.nn.HeteroGraphConv({et: dgl.nn.SAGEConv(d, d, "mean") for et in hg.edge_types}, "sum")
        with torch.no_grad():
            for et in hg.edge_types:
                theirs, conv = dgl_layer.mods[str(et)], pyg.convs[et]
                theirs.fc_neigh.weight.copy_(conv.lin_l.weight)
                theirs.fc_self.weight.copy_(conv.lin_r.weight)
                theirs.fc_self.bias.copy_(conv.lin_l.bias)  # DGL keeps the bias on fc_self
        steps["DGL"] = step(dgl_layer, dgl_graph)
    return [("SAGEConv per relation, sum", steps, None)]


CASES = {"rgat": rgat_cases, "hgt": hgt_cases, "heteroconv": heteroconv_cases}


def attention_rows(args: argparse.Namespace) -> list[AttentionRow]:
    """Forward + backward of a layer (``--layer`` rgat, hgt or heteroconv) per graph and mechanism:
    featgraph's against PyG's."""
    cases, device = CASES[args.layer], torch.device(args.device)
    with_dgl = args.layer == "heteroconv" and dgl_on(device) is not None
    dgl_titles = ("DGL ms", "DGL / featgraph") if with_dgl else ()
    print(markdown_header("graph", "mechanism", "featgraph ms", "PyG ms", "PyG / featgraph", *dgl_titles), flush=True)
    rows = []
    for name, hg in graphs(args.scale, args.mag_scale, device).items():
        for mechanism, steps, skipped in cases(hg, args):
            times, failed = best_times(steps, args.repeat)
            ours, pyg_ms, dgl_ms = times.get("featgraph"), times.get("PyG"), times.get("DGL")
            ratio, dgl_ratio = over(pyg_ms, ours), over(dgl_ms, ours)
            rows.append(AttentionRow(
                name, hg.num_nodes, hg.num_edges, hg.num_relations, args.channels, mechanism, ours, pyg_ms, ratio,
                dgl_ms, dgl_ratio, failure_note(failed),
            ))  # fmt: skip
            heads = "" if args.layer == "heteroconv" else f", {args.heads} heads"
            label = f"{name} ({hg.num_nodes} nodes, {hg.num_edges} edges, d={args.channels}{heads})"
            pyg_cells = [time_cell(pyg_ms, f"skipped ({skipped})" if skipped else failed.get("PyG")), ratio_cell(ratio)]
            dgl_cells = [time_cell(dgl_ms, failed.get("DGL")), ratio_cell(dgl_ratio)] if with_dgl else []
            ours_cell = time_cell(ours, failed.get("featgraph"))
            print(markdown_row([label, mechanism, ours_cell, *pyg_cells, *dgl_cells]), flush=True)
    return rows


def layer_step(layer: torch.nn.Module, x: torch.Tensor, *args: object) -> ForwardBackward:
    """One training step of ``layer``: forward, then backward into ``x`` and the parameters."""
    return ForwardBackward(lambda: layer(x, *args), [x, *layer.parameters()])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--layer", choices=("rgcn", *CASES), default="rgcn")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--channels", type=int, default=64, help="input and output feature width")
    parser.add_argument("--heads", type=int, default=2, help="RGATConv's and HGTConv's attention heads")
    parser.add_argument("--mag-scale", type=float, default=0.01, help="the mag-like graph's scale")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the graphs' node and edge counts (tests)")
    parser.add_argument("--fast-max-gb", type=float, default=2.0, help="skip FastRGCNConv above this per-edge weight")
    parser.add_argument("--device", default="cpu", help="where the layers run: cpu (default) or cuda")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[Row] | list[AttentionRow]:
    print(f"machine: {machine()}; device: {device_name(args.device)}")
    rows = attention_rows(args) if args.layer in CASES else convolution_rows(args)
    write_json(args.json, [asdict(r) for r in rows], device=device_name(args.device))
    return rows


def convolution_rows(args: argparse.Namespace) -> list[Row]:
    """RGCNConv forward + backward per graph: featgraph's two ways against PyG's two layers."""
    from torch_geometric.nn import FastRGCNConv as PygFastRGCNConv
    from torch_geometric.nn import RGCNConv as PygRGCNConv

    from ..nn import RGCNConv

    titles = ("graph", "featgraph ms", "featgraph fused ms", "PyG RGCNConv ms", "PyG FastRGCNConv ms")
    print(markdown_header(*titles, "RGCNConv / featgraph", "FastRGCNConv / featgraph"), flush=True)
    d, device = args.channels, torch.device(args.device)
    rows = []
    for name, hg in graphs(args.scale, args.mag_scale, device).items():
        relations = hg.num_relations
        torch.manual_seed(0)
        pyg = PygRGCNConv(d, d, relations)
        ours = RGCNConv(d, d, relations)
        ours.load_state_dict(pyg.state_dict())
        fused = RGCNConv(d, d, relations)
        fused.load_state_dict(pyg.state_dict())
        fused.strategy = "fused"
        fast = PygFastRGCNConv(d, d, relations)
        fast.load_state_dict(pyg.state_dict())
        pyg, ours, fused, fast = (layer.to(device) for layer in (pyg, ours, fused, fast))
        x = torch.randn(hg.num_nodes, d, device=device, requires_grad=True)
        edge_index, edge_type = hg.graph.edge_index, hg.etype

        steps = {
            "featgraph": layer_step(ours, x, edge_index, edge_type),
            "featgraph fused": layer_step(fused, x, edge_index, edge_type),
            "PyG RGCNConv": layer_step(pyg, x, edge_index, edge_type),
        }
        fast_gb = hg.num_edges * d * d * x.element_size() / 2**30
        if fast_gb <= args.fast_max_gb:
            steps["PyG FastRGCNConv"] = layer_step(fast, x, edge_index, edge_type)
        times, failed = best_times(steps, args.repeat)
        ours_ms, fused_ms, pyg_ms, fast_ms = (times.get(impl) for impl in IMPLEMENTATIONS)
        row = Row(
            name, hg.num_nodes, hg.num_edges, relations, d, ours_ms, fused_ms, pyg_ms, fast_ms, over(pyg_ms, ours_ms),
            over(fast_ms, ours_ms), failure_note(failed),
        )  # fmt: skip
        rows.append(row)
        label = f"{name} ({hg.num_nodes} nodes, {hg.num_edges} edges, d={d})"
        why = {"PyG FastRGCNConv": f"skipped ({fast_gb:.1f} GB per-edge weight)", **failed}
        cells = [time_cell(times.get(impl), why.get(impl)) for impl in IMPLEMENTATIONS]
        ratios = [ratio_cell(row.rgcn_over_featgraph), ratio_cell(row.fast_rgcn_over_featgraph)]
        print(markdown_row([label, *cells, *ratios]), flush=True)
    return rows
