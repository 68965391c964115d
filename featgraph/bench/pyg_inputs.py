"""``featgraph bench pyg-inputs``: CPU time to build featgraph's Graph and the formats a training step reads
from PyG's inputs: an edge_index, a sorted ``EdgeIndex`` (with and without its cached transpose) and a torch
sparse CSR ``adj_t``. Needs PyG."""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from dataclasses import asdict, dataclass

import torch

from ..datasets import products_like
from ..graph import conversion
from .report import Table, add_common_arguments, machine, write_json


@dataclass
class Row:
    input: str
    formats: str  # the formats built after the Graph: "CSR", "CSC" or "CSR + CSC"
    cpu_ms: float  # median over --repeat


def build_ms(edges: torch.Tensor, formats: list[str], num_nodes: int) -> float:
    """CPU milliseconds for ``as_graph`` and the named formats, nothing remembered from an earlier call."""
    conversion._graphs.clear()
    start = time.process_time()
    graph = conversion.as_graph(edges, num_nodes)
    for name in formats:
        getattr(graph, name)()
    return (time.process_time() - start) * 1e3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=0.3, help="products-like's size as a share of ogbn-products")
    add_common_arguments(parser, repeat=3)


def run(args: argparse.Namespace) -> list[Row]:
    from torch_geometric import EdgeIndex

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    g = products_like(args.scale).graph
    n, edge_index = g.num_nodes, torch.stack(g.coo())

    def sorted_by(order: str) -> torch.Tensor:
        return EdgeIndex(edge_index, sparse_size=(n, n)).sort_by(order).values

    by_col, by_row, by_col_cached, adj_t = sorted_by("col"), sorted_by("row"), sorted_by("col"), g.adjacency()
    by_col_cached.fill_cache_()
    plain_by_col = by_col.as_tensor().clone()
    cases = {  # inputs made beforehand: only featgraph's work is timed
        ("edge_index (random order)", "CSR"): (edge_index, ["csr"]),
        ("edge_index sorted by destination (plain tensor)", "CSR"): (plain_by_col, ["csr"]),
        ('`EdgeIndex`, sort_order="col"', "CSR"): (by_col, ["csr"]),
        ('`EdgeIndex`, sort_order="row"', "CSC"): (by_row, ["csc"]),
        ("torch sparse CSR `adj_t`", "CSR"): (adj_t, ["csr"]),
        ("edge_index (random order)", "CSR + CSC"): (edge_index, ["csr", "csc"]),
        ('`EdgeIndex`, sort_order="col", after `fill_cache_()`', "CSR + CSC"): (by_col_cached, ["csr", "csc"]),
    }
    times: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    for _ in range(args.repeat):  # interleaved, so a slow spell of the machine hits every case alike
        for case, (edges, formats) in cases.items():
            times[case].append(build_ms(edges, formats, n))
    rows = [Row(name, formats, statistics.median(values)) for (name, formats), values in times.items()]
    print(f"machine: {machine()}")
    print(f"products-like {args.scale}: {n} vertices, {edge_index.shape[1]} edges")
    print(Table({"input": "input", "formats built": "formats", "CPU ms": "cpu_ms:.0f"})(rows))
    write_json(args.json, [asdict(r) for r in rows], scale=args.scale)
    return rows
