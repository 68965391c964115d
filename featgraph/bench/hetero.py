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
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

import torch

from ..datasets.planted import mag_like, relation_sizes
from ..graph import HeteroGraph
from ..graph.hetero import with_reverse_edges
from ..graph.interop import import_dgl
from ..timing import interleaved_best_ms
from .kernels import ForwardBackward
from .report import machine, markdown_header, markdown_row, write_json

# name: (node types' counts, relations, edges) at scale 1
GRAPHS = {
    "3 types, 10 relations": ((20_000, 20_000, 10_000), 10, 100_000),
    "3 types, 50 relations": ((20_000, 20_000, 10_000), 50, 100_000),
    "AIFB-like, 90 relations": ((8_285,), 90, 58_086),
}
IMPLEMENTATIONS = ("featgraph", "featgraph fused", "PyG RGCNConv", "PyG FastRGCNConv")


@dataclass
class Row:
    graph: str
    nodes: int
    edges: int
    relations: int
    channels: int
    featgraph_ms: float
    featgraph_fused_ms: float
    pyg_rgcn_ms: float
    pyg_fast_rgcn_ms: float | None  # None: skipped (its per-edge weight over --fast-max-gb)
    rgcn_over_featgraph: float
    fast_rgcn_over_featgraph: float | None


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
    featgraph_ms: float
    pyg_ms: float | None  # None: skipped (its per-edge weight over --fast-max-gb)
    pyg_over_featgraph: float | None
    dgl_ms: float | None = None  # heteroconv's DGL HeteroGraphConv, where DGL imports
    dgl_over_featgraph: float | None = None


def mag_graph(scale: float) -> HeteroGraph:
    """``mag_like`` at ``scale`` with every edge type also reversed, as PyG's ``ToUndirected`` makes it."""
    typed = mag_like(scale).graph
    return HeteroGraph(with_reverse_edges(typed.to_edge_index_dict()), typed.num_nodes_dict)


def graphs(scale: float, mag_scale: float) -> dict[str, HeteroGraph]:
    """The bench's typed graphs, node and edge counts times ``scale`` (mag-like: ``mag_scale``)."""
    out = {}
    for name, (counts, relations, edges) in GRAPHS.items():
        counts = tuple(max(1, int(n * scale)) for n in counts)
        out[name] = typed_graph(counts, relations, max(1, int(edges * scale)))
    out[f"mag-like-{mag_scale:g}, 8 relations"] = mag_graph(mag_scale)
    return out


Case = tuple[str, dict[str, ForwardBackward], str | None]  # (mechanism, steps by implementation, why PyG's is left out)


def rgat_cases(hg: HeteroGraph, args: argparse.Namespace) -> list[Case]:
    """RGATConv's two attention mechanisms on ``hg``'s homogeneous view; PyG's left out where its per-edge weight
    would exceed ``--fast-max-gb``."""
    from torch_geometric.nn import RGATConv as PygRGATConv

    from ..nn import RGATConv

    d, heads, relations = args.channels, args.heads, hg.num_relations
    x = torch.randn(hg.num_nodes, d, requires_grad=True)
    edge_index, edge_type = hg.graph.edge_index, hg.etype
    pyg_gb = hg.num_edges * d * heads * d * x.element_size() / 2**30
    cases = []
    for mechanism in ("across-relation", "within-relation"):
        torch.manual_seed(0)
        pyg = PygRGATConv(d, d, relations, heads=heads, attention_mechanism=mechanism)
        ours = RGATConv(d, d, relations, heads=heads, attention_mechanism=mechanism)
        ours.load_state_dict(pyg.state_dict())
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
    x_dict = {t: torch.randn(n, d, requires_grad=True) for t, n in hg.num_nodes_dict.items()}
    edges = hg.to_edge_index_dict()
    torch.manual_seed(0)
    pyg = PygHGTConv(d, d, (list(hg.node_types), list(hg.edge_types)), heads=args.heads)
    ours = HGTConv(d, d, (list(hg.node_types), list(hg.edge_types)), heads=args.heads)
    ours.load_state_dict(pyg.state_dict())

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
    x_dict = {t: torch.randn(n, d, requires_grad=True) for t, n in hg.num_nodes_dict.items()}
    edges = hg.to_edge_index_dict()
    torch.manual_seed(0)
    pyg = HeteroConv({et: SAGEConv((d, d), d) for et in hg.edge_types}, aggr="sum")
    ours = copy.deepcopy(pyg)
    accelerate(ours)

    def step(layer: torch.nn.Module, *graph: object) -> ForwardBackward:
        def forward() -> torch.Tensor:  # DGL's outputs come in its node types' order, PyG's in its layers'
            out = layer(*graph, x_dict) if graph else layer(x_dict, edges)
            return torch.cat([out[t] for t in sorted(out)])

        return ForwardBackward(forward, [*x_dict.values(), *layer.parameters()])

    steps = {"featgraph": step(ours), "PyG": step(pyg)}
    dgl = import_dgl()
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
    cases = CASES[args.layer]
    with_dgl = args.layer == "heteroconv" and import_dgl() is not None
    dgl_titles = ("DGL ms", "DGL / featgraph") if with_dgl else ()
    print(markdown_header("graph", "mechanism", "featgraph ms", "PyG ms", "PyG / featgraph", *dgl_titles), flush=True)
    rows = []
    for name, hg in graphs(args.scale, args.mag_scale).items():
        for mechanism, steps, skipped in cases(hg, args):
            times = interleaved_best_ms(steps, args.repeat)
            pyg_ms, dgl_ms, ours = times.get("PyG"), times.get("DGL"), times["featgraph"]
            ratio = None if pyg_ms is None else pyg_ms / ours
            dgl_ratio = None if dgl_ms is None else dgl_ms / ours
            rows.append(AttentionRow(
                name, hg.num_nodes, hg.num_edges, hg.num_relations, args.channels, mechanism, ours, pyg_ms, ratio,
                dgl_ms, dgl_ratio,
            ))  # fmt: skip
            heads = "" if args.layer == "heteroconv" else f", {args.heads} heads"
            label = f"{name} ({hg.num_nodes} nodes, {hg.num_edges} edges, d={args.channels}{heads})"
            pyg_cells = [f"skipped ({skipped})", "-"] if pyg_ms is None else [f"{pyg_ms:.1f}", f"{ratio:.1f}x"]
            dgl_cells = [f"{dgl_ms:.1f}", f"{dgl_ratio:.1f}x"] if with_dgl else []
            print(markdown_row([label, mechanism, f"{ours:.1f}", *pyg_cells, *dgl_cells]), flush=True)
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
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[Row] | list[AttentionRow]:
    print(f"machine: {machine()}")
    if args.layer in CASES:
        rows = attention_rows(args)
        write_json(args.json, [asdict(r) for r in rows])
        return rows
    return convolution_rows(args)


def convolution_rows(args: argparse.Namespace) -> list[Row]:
    """RGCNConv forward + backward per graph: featgraph's two ways against PyG's two layers."""
    from torch_geometric.nn import FastRGCNConv as PygFastRGCNConv
    from torch_geometric.nn import RGCNConv as PygRGCNConv

    from ..nn import RGCNConv

    titles = ("graph", "featgraph ms", "featgraph fused ms", "PyG RGCNConv ms", "PyG FastRGCNConv ms")
    print(markdown_header(*titles, "RGCNConv / featgraph", "FastRGCNConv / featgraph"), flush=True)
    d = args.channels
    rows = []
    for name, hg in graphs(args.scale, args.mag_scale).items():
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
        x = torch.randn(hg.num_nodes, d, requires_grad=True)
        edge_index, edge_type = hg.graph.edge_index, hg.etype

        steps = {
            "featgraph": layer_step(ours, x, edge_index, edge_type),
            "featgraph fused": layer_step(fused, x, edge_index, edge_type),
            "PyG RGCNConv": layer_step(pyg, x, edge_index, edge_type),
        }
        fast_gb = hg.num_edges * d * d * x.element_size() / 2**30
        if fast_gb <= args.fast_max_gb:
            steps["PyG FastRGCNConv"] = layer_step(fast, x, edge_index, edge_type)
        times = interleaved_best_ms(steps, args.repeat)
        fast_ms = times.get("PyG FastRGCNConv")
        row = Row(
            name, hg.num_nodes, hg.num_edges, relations, d, times["featgraph"], times["featgraph fused"],
            times["PyG RGCNConv"], fast_ms, times["PyG RGCNConv"] / times["featgraph"],
            None if fast_ms is None else fast_ms / times["featgraph"],
        )  # fmt: skip
        rows.append(row)
        label = f"{name} ({hg.num_nodes} nodes, {hg.num_edges} edges, d={d})"
        fast_cells = (
            [f"skipped ({fast_gb:.1f} GB per-edge weight)", "-"]
            if fast_ms is None
            else [f"{fast_ms:.1f}", f"{row.fast_rgcn_over_featgraph:.1f}x"]
        )
        cells = [label, f"{row.featgraph_ms:.1f}", f"{row.featgraph_fused_ms:.1f}", f"{row.pyg_rgcn_ms:.1f}"]
        print(markdown_row([*cells, fast_cells[0], f"{row.rgcn_over_featgraph:.1f}x", fast_cells[1]]), flush=True)
    write_json(args.json, [asdict(r) for r in rows])
    return rows
