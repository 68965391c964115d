"""Speed targets bound by gathers, against this machine's gather rate: ``featgraph bench feasibility``.

Each target fixes a time: a baseline's time over a factor, or a factor times the perfect-reuse bound. A
row gives featgraph's time, the target's, and the gather bound: the per-edge row reads alone at the rate
this machine gathers random rows of that width from an array of that size, every other byte free (see
``roofline``). Below the gather bound a kernel must get rows from a faster cache than the one the array
lives in: the row says what share of the row reads the target needs served that way, and what share a
thread's private cache can serve when endpoints are uniformly random, as in both benchmark graphs (by
chance, or by 2D blocks of sources and destinations: ``roofline.reuse_possible``). A target needing more
is out of reach here for the known schedules (edge orders, source partitions, feature tiles, 2D blocks);
a model of those, not a formal I/O lower bound.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import torch

from ..graph import Graph
from ..timing import interleaved_best_ms
from .kernels import BENCHES, GRAPHS
from .report import Table, add_common_arguments, each_graph, machine, write_json
from .roofline import Traffic, gather_gbps, gather_ms, reuse_needed, reuse_possible, traffic, triad_gbps


@dataclass(frozen=True)
class Target:
    """``factor`` faster than ``baseline`` (an implementation of the kernel benchmark), or, without a
    baseline, within ``factor`` times the perfect-reuse bound; on ``graphs`` (all if empty) at d >= ``min_d``
    (only ``dims`` if given)."""

    name: str
    op: str
    baseline: str | None
    factor: float
    graphs: tuple[str, ...] = ()
    min_d: int = 0
    dims: tuple[int, ...] = ()

    def applies(self, graph: str, d: int) -> bool:
        return (not self.graphs or graph in self.graphs) and d >= self.min_d and (not self.dims or d in self.dims)

    def time_ms(self, bytes_moved: Traffic, threads: int, baseline_ms: float | None) -> float:
        """The target's time for a row that moves ``bytes_moved`` (this target's op)."""
        if self.baseline is None:
            return self.factor * bytes_moved.perfect / triad_gbps(threads) / 1e6
        if baseline_ms is None:
            raise ValueError(f"target {self.name!r} needs the time of {self.baseline!r}")
        return baseline_ms / self.factor


TORCH_SPARSE, DGL_GCN = "torch.sparse.mm (CSR)", "DGL copy_u_sum"
TARGETS = (
    Target("SpMM sum >= 3x torch.sparse at d=128", "gcn", TORCH_SPARSE, 3.0, dims=(128,)),
    Target("SpMM sum >= 2x torch.sparse at every d", "gcn", TORCH_SPARSE, 2.0),
    Target("GCN fwd+bwd >= 1.5x DGL", "gcn-train", DGL_GCN, 1.5),
    Target("GCN within 5x of perfect reuse, uniform, d >= 128", "gcn", None, 5.0, ("uniform",), 128),
)


@dataclass
class Row:
    target: str
    graph: str
    d: int
    threads: int
    ms: float  # featgraph
    baseline_ms: float | None  # None: the target is a factor of the perfect-reuse bound
    target_ms: float
    gather_ms: float
    reuse_needed: float
    reuse_possible: float

    @property
    def verdict(self) -> str:
        """``met``; ``not met; within reach`` where the target needs no more reuse than the graph allows;
        ``out of reach here`` where it needs more."""
        if self.ms <= self.target_ms:
            return "met"
        if self.reuse_needed <= self.reuse_possible:
            return "not met; within reach"
        return "out of reach here"


def evaluate(target: Target, graph: str, g: Graph, d: int, threads: int, ms: float, baseline_ms: float | None) -> Row:
    """One target row from featgraph's time ``ms`` (and the baseline's) at ``threads`` threads."""
    bytes_moved = traffic(target.op, g, d)
    rate = gather_gbps(threads, bytes_moved.array, bytes_moved.row)
    target_ms = target.time_ms(bytes_moved, threads, baseline_ms)
    return Row(
        target.name, graph, d, threads, ms, baseline_ms, target_ms, gather_ms(bytes_moved, rate),
        reuse_needed(bytes_moved, target_ms, rate), reuse_possible(g, bytes_moved),
    )  # fmt: skip


def rows_from(times: dict[tuple[str, str, int, int, str], float], graphs: dict[str, Graph]) -> list[Row]:
    """Every target row the measured ``times`` ((op, graph, d, threads, implementation) -> ms) allow."""
    rows = []
    for target in TARGETS:
        for op, graph, d, threads, impl in times:
            if op != target.op or impl != "featgraph" or not target.applies(graph, d):
                continue
            baseline = times.get((op, graph, d, threads, target.baseline)) if target.baseline else None
            if target.baseline and baseline is None:
                continue
            ms = times[(op, graph, d, threads, impl)]
            rows.append(evaluate(target, graph, graphs[graph], d, threads, ms, baseline))
    return rows


TABLE = Table({
    "target": "target", "graph": "graph", "d": "d", "threads": "threads", "featgraph ms": "ms:.2f",
    "baseline ms": "baseline_ms:.2f", "target ms": "target_ms:.2f", "gather bound ms": "gather_ms:.2f",
    "reuse needed": "reuse_needed:.0%", "reuse possible": "reuse_possible:.0%", "verdict": "verdict",
})  # fmt: skip


def measure(op: str, g: Graph, d: int, threads: int, impls: Iterable[str], repeat: int) -> dict[str, float]:
    """Best times of featgraph and the named baselines of the kernel benchmark's ``op`` (others skipped)."""
    torch.set_num_threads(threads)
    available = BENCHES[op](g, d, threads)
    return interleaved_best_ms(
        {name: available[name] for name in ("featgraph", *impls) if callable(available.get(name))}, repeat
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--dims", nargs="+", type=int, default=[32, 64, 128, 256, 512])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    add_common_arguments(parser, repeat=5, scale=1.0)


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}")
    print("gather bound: the per-edge row reads alone at the rate this machine gathers random rows")
    rows: list[Row] = []
    for graph_name, g in each_graph(args.graphs, GRAPHS, args.scale, TABLE.header):
        times: dict[tuple[str, str, int, int, str], float] = {}
        for op in sorted({t.op for t in TARGETS}):
            baselines = {t.baseline for t in TARGETS if t.op == op and t.baseline}
            for d in args.dims:
                for threads in args.threads:
                    measured = measure(op, g, d, threads, baselines, args.repeat)
                    times.update({(op, graph_name, d, threads, impl): ms for impl, ms in measured.items()})
        graph_rows = rows_from(times, {graph_name: g})
        print(TABLE.rows(graph_rows), flush=True)
        rows += graph_rows
    write_json(args.json, [{**asdict(r), "verdict": r.verdict} for r in rows])
    return rows
