"""``featgraph bench overhead``: what one call costs on small graphs, and how much of it is the kernels' work.

On a Cora-sized graph an aggregation's kernel runs for microseconds, so the Python around it (argument checks,
the graph and kernel lookups, the operator dispatch, autograd) decides an epoch. For graphs of 1k-100k edges
this times one call of featgraph's ops and layers (forward and, for training, backward) against PyG's doing
the same, and splits featgraph's time into its compiled kernels' work (every native launch timed as it runs)
and the rest: Python, dispatch, autograd and torch's own ops in the call (the loss's sum and its backward,
dense products), which on the smallest graphs is the fixed cost of a call. The layers' "fresh" cases take
another graph each call, as a mini-batch step does: what binding a new graph costs (its conversion, formats
and kernels) against PyG's layers on the same edges."""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch

from .. import ops
from ..backends import cpu
from ..graph import Graph
from ..native import toolchain
from ..timing import interleaved_best_ms
from .report import Table, add_common_arguments, cell, machine, write_json

EDGES = (1_000, 10_000, 100_000)
AVERAGE_DEGREE = 4  # Cora's is 3.9
LAYERS = ("GCNConv", "SAGEConv", "GATConv")
FRESH = " fresh"  # a layer's case on another graph every call, as a mini-batch loader hands each step one
CASES = ("copy_u_sum", "copy_u_sum+grad", *LAYERS, *(name + FRESH for name in LAYERS))
# graphs of one size the fresh cases take in turn: more than featgraph remembers by tensor
# (``graph.conversion``), so each call builds its graph, formats and kernel bindings, as a new block does
FRESH_GRAPHS = 24


@dataclass
class Row:
    case: str
    edges: int
    d: int
    featgraph_us: float
    kernels_us: float  # featgraph's compiled kernels' share of a call
    other_us: float  # the rest: featgraph's Python, dispatch, autograd and torch's ops around the kernels
    pyg_us: float | None
    pyg_over_featgraph: float | None


TABLE = Table(
    {
        "case": "case", "edges": "edges", "d": "d", "featgraph us": "featgraph_us:.1f", "kernels us": "kernels_us:.1f",
        "other us": "other_us:.1f", "PyG us": "pyg_us:.1f",
        "PyG / featgraph": lambda r: cell(r.pyg_over_featgraph, ".2f") + "x" * (r.pyg_over_featgraph is not None),
    }
)  # fmt: skip


@contextmanager
def kernel_clock() -> Iterator[list[float]]:
    """Time every native kernel launch made inside the block; yields the running total in seconds ([total])."""
    total, launch = [0.0], cpu.launch

    def timed(*args: object) -> None:
        start = time.perf_counter()
        launch(*args)
        total[0] += time.perf_counter() - start

    cpu.launch = timed
    try:
        yield total
    finally:
        cpu.launch = launch


def training_step(fn: Callable[[], torch.Tensor], x: torch.Tensor) -> Callable[[], None]:
    """``fn``'s forward, then its backward into ``x`` and the parameters."""

    def step() -> None:
        x.grad = None
        fn().sum().backward()

    return step


def cases(edges: int, d: int) -> Iterator[tuple[str, Callable[[], object], Callable[[], object] | None]]:
    """(case, featgraph's call, PyG's call or None) on a random graph with ``edges`` edges."""
    import torch_geometric.nn as pyg_nn
    from torch_geometric.utils import scatter

    from .. import nn as featgraph_nn

    num_nodes = max(1, edges // AVERAGE_DEGREE)
    edge_index = torch.randint(0, num_nodes, (2, edges))
    fresh = [torch.randint(0, num_nodes, (2, edges)) for _ in range(FRESH_GRAPHS)]
    g = Graph.from_edge_index(edge_index, num_nodes=num_nodes)
    x = torch.randn(num_nodes, d)
    src, dst = edge_index

    def pyg_sum(h: torch.Tensor) -> torch.Tensor:  # what PyG's propagate does for a plain sum
        return scatter(h.index_select(0, src), dst, 0, num_nodes, "sum")

    yield "copy_u_sum", lambda: ops.copy_u_sum(g, x), lambda: pyg_sum(x)
    xg = x.clone().requires_grad_()
    yield (
        "copy_u_sum+grad",
        training_step(lambda: ops.copy_u_sum(g, xg), xg),
        training_step(lambda: pyg_sum(xg), xg),
    )
    layers = {}
    for name in LAYERS:
        theirs = getattr(pyg_nn, name)(d, d)
        ours = getattr(featgraph_nn, name)(d, d)
        ours.load_state_dict(theirs.state_dict())
        layers[name] = ours, theirs
        yield (
            name,
            training_step(lambda ours=ours: ours(xg, edge_index), xg),
            training_step(lambda theirs=theirs: theirs(xg, edge_index), xg),
        )
    for name, (ours, theirs) in layers.items():
        ours_next, theirs_next = itertools.cycle(fresh).__next__, itertools.cycle(fresh).__next__
        yield (
            name + FRESH,
            training_step(lambda ours=ours, n=ours_next: ours(xg, n()), xg),
            training_step(lambda theirs=theirs, n=theirs_next: theirs(xg, n()), xg),
        )


def looped(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    def loop() -> None:
        for _ in range(calls):
            fn()

    return loop


def measure(case: str, edges: int, d: int, ours: Callable, theirs: Callable | None, calls: int, repeat: int) -> Row:
    """One row: per-call microseconds of both (best of ``repeat`` loops of ``calls`` calls, taking turns), and
    featgraph's kernel share from a further loop with every launch timed."""
    fns = {"featgraph": looped(ours, calls)} | ({"pyg": looped(theirs, calls)} if theirs else {})
    times = {name: ms * 1e3 / calls for name, ms in interleaved_best_ms(fns, repeat).items()}
    with kernel_clock() as total:
        looped(ours, calls)()
    kernels = total[0] * 1e6 / calls
    pyg = times.get("pyg")
    total_us = times["featgraph"]
    speedup = None if pyg is None else pyg / total_us
    return Row(case, edges, d, total_us, kernels, max(0.0, total_us - kernels), pyg, speedup)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--edges", nargs="+", type=int, default=list(EDGES))
    parser.add_argument("--dims", nargs="+", type=int, default=[16])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--calls", type=int, default=50, help="calls per timed loop")
    add_common_arguments(parser, repeat=5, threads=toolchain.num_threads())


def run(args: argparse.Namespace) -> list[Row]:
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}")
    print(TABLE.header, flush=True)
    rows = []
    for edges in args.edges:
        for d in args.dims:
            for case, ours, theirs in cases(edges, d):
                if case not in args.cases:
                    continue
                rows.append(measure(case, edges, d, ours, theirs, args.calls, args.repeat))
                print(TABLE.rows(rows[-1:]), flush=True)
    write_json(args.json, [asdict(r) for r in rows])
    return rows
