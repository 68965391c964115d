"""``featgraph bench sensitivity``: the FeatGraph paper's sensitivity studies on this machine.

- Figure 14: GCN aggregation time over a grid of graph partitions x feature partitions (tiles), drawn as
  a heat map. It shows how far the heuristic default and the tuner's choice are from the grid's best.
- Table V: GCN aggregation on uniform graphs of one vertex count and increasing density, featgraph
  against torch.sparse.mm (CSR, MKL) in the same run.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..datasets import uniform
from ..graph import Graph
from ..native import toolchain
from ..timing import best_ms
from . import plots
from .kernels import GRAPHS, op_kernel
from .report import Table, add_common_arguments, machine, write_json

GRID = (1, 2, 4, 8, 16)
DEGREES = (5, 10, 20, 50, 100)


@dataclass
class Heatmap:
    graph: str
    d: int
    partitions: tuple[int, ...]
    tiles: tuple[int, ...]
    ms: list[list[float]]  # ms[partition index][tile index]
    default_ms: float

    def best(self) -> tuple[int, int, float]:
        return min(
            ((p, t, self.ms[i][j]) for i, p in enumerate(self.partitions) for j, t in enumerate(self.tiles)),
            key=lambda cell: cell[2],
        )


def heatmap(graph_name: str, g: Graph, d: int, threads: int, repeat: int, grid: tuple[int, ...] = GRID) -> Heatmap:
    """GCN aggregation (copy_u + sum) time for every (partitions, tiles) pair, and with the default."""
    x = torch.randn(g.num_nodes, d)
    tiles = tuple(t for t in grid if t <= d)
    ms = []
    for p in grid:
        row = []
        for t in tiles:
            kernel = op_kernel("gcn", g, d, threads, num_partitions=p, num_feature_tiles=t)
            row.append(best_ms(lambda k=kernel: k(XV=x), repeat))
        ms.append(row)
    default = op_kernel("gcn", g, d, threads)
    return Heatmap(graph_name, d, grid, tiles, ms, best_ms(lambda: default(XV=x), repeat))


def heatmap_markdown(h: Heatmap) -> str:
    head = "| partitions \\ tiles | " + " | ".join(str(t) for t in h.tiles) + " |"
    lines = [head, "|---" * (len(h.tiles) + 1) + "|"]
    for p, row in zip(h.partitions, h.ms, strict=True):
        lines.append(f"| {p} | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    p, t, best = h.best()
    lines.append(
        f"\nGCN aggregation ms, {h.graph}, d={h.d}: best {best:.1f} ms at {p} partitions x {t} tiles; "
        f"the heuristic default {h.default_ms:.1f} ms ({h.default_ms / best:.2f}x the best)."
    )
    return "\n".join(lines)


def draw_heatmap(h: Heatmap, folder: Path) -> Path | None:
    return plots.heatmap(
        h.ms, h.partitions, h.tiles, folder / f"heatmap-{h.graph}-d{h.d}.png",
        f"GCN aggregation ms ({h.graph}, d={h.d})", "graph partitions", "feature partitions (tiles)",
    )  # fmt: skip


@dataclass
class DensityRow:
    num_nodes: int
    avg_degree: int
    num_edges: int
    density_pct: float
    featgraph_ms: float
    torch_sparse_ms: float
    speedup: float  # torch.sparse / featgraph


def density_rows(num_nodes: int, d: int, threads: int, repeat: int, degrees=DEGREES) -> list[DensityRow]:
    """Table V: uniform graphs of ``num_nodes`` vertices and each average degree, GCN aggregation."""
    rows = []
    for degree in degrees:
        g = uniform(num_nodes, degree, seed=0)
        x = torch.randn(num_nodes, d)
        kernel, adj = op_kernel("gcn", g, d, threads), g.adjacency()
        ours = best_ms(lambda k=kernel, x=x: k(XV=x), repeat)
        theirs = best_ms(lambda a=adj, x=x: torch.sparse.mm(a, x), repeat)
        density = 100 * g.num_edges / num_nodes**2
        rows.append(DensityRow(num_nodes, degree, g.num_edges, density, ours, theirs, theirs / ours))
        print(density_markdown(rows[-1:], header=len(rows) == 1), flush=True)
    return rows


DENSITY_TABLE = Table({
    "vertices": "num_nodes", "avg degree": "avg_degree", "edges": "num_edges", "density %": "density_pct:.3f",
    "featgraph ms": "featgraph_ms:.2f", "torch.sparse ms": "torch_sparse_ms:.2f", "speedup": "speedup:.2f",
})  # fmt: skip


def density_markdown(rows: list[DensityRow], header: bool = True) -> str:
    return DENSITY_TABLE(rows) if header else DENSITY_TABLE.rows(rows)


def draw_density(rows: list[DensityRow], d: int, folder: Path) -> Path | None:
    degrees = [r.avg_degree for r in rows]
    return plots.lines(
        {"featgraph": (degrees, [r.featgraph_ms for r in rows]),
         "torch.sparse.mm (CSR)": (degrees, [r.torch_sparse_ms for r in rows])},
        folder / f"density-d{d}.png", f"GCN aggregation on uniform {rows[0].num_nodes}-vertex graphs, d={d}",
        "average degree", "ms", log_x=True, log_y=True,
    )  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", default="uniform", choices=list(GRAPHS), help="graph of the heat map")
    parser.add_argument("--dim", type=int, default=256, help="feature length of both studies")
    parser.add_argument("--vertices", type=int, default=50_000, help="vertices of the density sweep's graphs")
    parser.add_argument("--degrees", nargs="+", type=int, default=list(DEGREES))
    parser.add_argument("--out", default="results/sensitivity", help="folder for the PNG figures")
    add_common_arguments(parser, 3, toolchain.num_threads(), 1.0, scale_help="shrink the heat map graph (tests)")


def run(args: argparse.Namespace) -> tuple[Heatmap, list[DensityRow]]:
    torch.set_num_threads(args.threads)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}; featgraph threads: {args.threads}")
    g = GRAPHS[args.graph](args.scale)
    print(f"graph {args.graph}: {g.num_nodes} vertices, {g.num_edges} edges", flush=True)
    h = heatmap(args.graph, g, args.dim, args.threads, args.repeat)
    print(heatmap_markdown(h), flush=True)
    rows = density_rows(args.vertices, args.dim, args.threads, args.repeat, tuple(args.degrees))
    figures = [draw_heatmap(h, folder), draw_density(rows, args.dim, folder)]
    drawn = [str(f) for f in figures if f is not None]
    print("figures: " + (", ".join(drawn) if drawn else "none (matplotlib is not installed)"))
    write_json(args.json, [asdict(r) for r in rows], threads=args.threads, heatmap=asdict(h))
    return h, rows
