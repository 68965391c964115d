"""``featgraph bench tc-fill``: how well a graph fills tensor-core tiles, in its own vertex order and in the
locality orders ``Graph.reordered`` builds, on the CPU (no GPU needed: the translation is the same).

Per graph and order: the share of TC-GNN's 16 x 16 tile cells that hold an edge (the part of every MMA that is
not a multiplication by zero), the tiles' bytes per edge in float32 (a CSR reads 8: an int32 column and a
float32 weight), the same for FlashSparse's 8 x 1 vectors (16 to a block, as ``ops.tc_spmm(tile_rows=8)``
runs them), the source rows each format's SpMM gathers per edge (one per distinct window and source: at
d >= 32 those rows are most of a tensor-core SpMM's bytes, and a CSR kernel gathers one per edge), and the
seconds the order took. Graphs: the bundled real
ones (Cora, Citeseer, email-Enron, astro-ph, cond-mat-2005), seeded community graphs (a stochastic block
model, ids shuffled) of PubMed's and Reddit's shapes, products-like, and the random graphs of the GPU tables
(uniform, rand100k); ``--scale`` shrinks the synthetic ones' vertex counts.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ..datasets import load, products_like, rand100k, uniform
from ..datasets.synthetic import community
from ..graph import Graph
from ..graph.reorder import METHODS
from .report import Table, add_common_arguments, each_graph, machine, write_json

TILE_WIDTH = 16  # the block width the tensor-core kernels take
GRAPHS: dict[str, Callable[[float], Graph]] = {
    **{name: (lambda scale, name=name: load(name).graph) for name in ("cora", "citeseer", "email-Enron", "astro-ph",
                                                                       "cond-mat-2005")},
    "pubmed-like": lambda scale: community(max(64, int(19_717 * scale)), 4.5, 64, 0.9, seed=0),
    "reddit-community": lambda scale: community(max(256, int(232_965 * scale)), 492, 256, 0.9, seed=0),
    "products-like": lambda scale: products_like(scale, seed=0).graph,
    "uniform": lambda scale: uniform(max(2, int(100_000 * scale)), 100, seed=0),
    "rand100k": lambda scale: rand100k(scale, 1.0 if scale >= 0.1 else 0.01, seed=0),
}  # fmt: skip
ORDERS = ("as given", *METHODS)


@dataclass
class Row:
    graph: str
    order: str
    tile_fill: float
    bytes_per_edge: float
    tile_rows_per_edge: float  # source rows gathered per edge by the 16 x 16 tiles' SpMM
    vector_fill: float
    vector_bytes_per_edge: float
    vector_rows_per_edge: float  # by the 8 x 1 vectors'
    order_s: float
    fill_vs_given: float | None = None


TABLE = Table({
    "graph": "graph", "order": "order", "16x16 tile fill": "tile_fill:.1%", "vs as given": "fill_vs_given:.2f",
    "tile bytes / edge": "bytes_per_edge:.1f", "rows gathered / edge": "tile_rows_per_edge:.3f",
    "8x1 vector fill": "vector_fill:.1%", "8x1 bytes / edge": "vector_bytes_per_edge:.1f",
    "8x1 rows / edge": "vector_rows_per_edge:.3f", "order s": "order_s:.1f",
})  # fmt: skip


def fill_rows(name: str, g: Graph, orders: list[str]) -> list[Row]:
    rows = []
    for order in orders:
        start = time.perf_counter()
        ordered = g if order == "as given" else g.reordered(order)[0]
        seconds = time.perf_counter() - start
        tiles, vectors = (ordered.tc_translation(TILE_WIDTH, window_rows) for window_rows in (16, 8))
        edges = max(ordered.num_edges, 1)
        rows.append(Row(
            name, order, tiles.fill(), tiles.bytes_per_edge(), tiles.gathered_rows() / edges,
            vectors.fill(), vectors.bytes_per_edge(), vectors.gathered_rows() / edges, seconds,
        ))  # fmt: skip
    for row in rows:
        row.fill_vs_given = row.tile_fill / rows[0].tile_fill if orders[0] == "as given" else None
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--orders", nargs="+", default=list(ORDERS), choices=list(ORDERS))
    add_common_arguments(parser, scale=0.1, scale_help="shrink the synthetic graphs' vertex counts (1.0: full size)")


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}; synthetic graphs at scale {args.scale}", flush=True)
    rows: list[Row] = []
    for name, g in each_graph(args.graphs, GRAPHS, args.scale, TABLE.header):
        batch = fill_rows(name, g, args.orders)
        print(TABLE.rows(batch), flush=True)
        rows += batch
    write_json(args.json, [asdict(r) for r in rows], scale=args.scale)
    return rows
