"""``featgraph bench dgl``: DGL's example-shaped training workloads under DGL's own API, each run twice, with DGL's
kernels and with ``featgraph.dgl.use()`` routing them to featgraph's, from the same weights and inputs.

Workloads (the models' code is DGL's layers in both rows; only the kernels behind them change):

- ``gcn``, ``gat``, ``sage``: full-graph two-layer ``GraphConv`` / ``GATConv`` / ``SAGEConv`` (mean) epochs with
  ``featgraph bench train``'s widths (``training.MODELS``), random features and labels as there, on email-Enron
  and rand100k-2.9M (self loops added for GCN and GAT, as DGL's examples do);
- ``rgcn``: two ``RelGraphConv`` layers (16 hidden, no regularizer, mean per relation) on the AM-shaped graph,
  as ``featgraph bench rgcn-train``;
- ``minibatch``: GraphSAGE (mean, 3 layers, 256 hidden) on products-like with DGL's ``NeighborSampler`` (fan-out
  [5, 10, 15], DGL's input-layer-first order) and ``DataLoader``, batches of 1024 seeds.

Per row, in its own process: milliseconds per training step (a full-graph epoch: forward, loss, backward,
Adam step, the median of ``--repeat`` after two warm-up epochs; mini-batch: one batch, sampling included,
from seeds/s over ``--batches`` after three warm-up batches), DGL's time over this row's, the peak memory
training adds, the losses of the first two steps (both rows start from the same weights, inputs, dropout
masks and batches, so they agree to float32 rounding: the first checks the forward, the second the
gradients and the step), and under featgraph how many kernel calls featgraph served and which fell back to
DGL's own kernels, and why (``featgraph.dgl.calls``). One more step runs under torch's profiler for the time
spent inside the side's kernels (DGL's kernel entry points however served, and the gradients of what they
ran):
featgraph's row compares the two sides' kernel times, and DGL's row gives the bound Amdahl's law sets, the
speedup featgraph would reach if its kernels took no time at all (everything else in the step, the dense
layers, dropout, DGL's graph bookkeeping, stays the same on both sides). With ``--runs N`` each side runs in N
processes, the sides taking turns, and each measured field is the median over them, every run's peak listed:
one side's peak memory moves by 20-90 MB from process to process on a 2-core VM. Beside the resident peak,
each row gives the bytes allocated at the peak (every worker counts its allocations, ``measure.peaks_extra_mb``),
which are the same from run to run and leave out the program text and the heap pages glibc keeps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .. import dgl as featgraph_dgl
from ..datasets import entity_like
from ..dgl import routing
from ..dgl.kernels import FEATGRAPH
from ..graph.interop import import_dgl
from ..native import toolchain
from ..training import preset
from . import minibatch, training
from .measure import counting_allocations, peaks_extra_mb
from .report import Table, add_common_arguments, machine, run_worker, write_json
from .rgcn_training import DglRGCN, OnTrainingNodes

FULL_GRAPH = ("gcn", "gat", "sage")
WORKLOADS = (*FULL_GRAPH, "rgcn", "minibatch")
BENCH_MODELS = {"gcn": "gcn", "gat": "gat", "sage": "sage-mean"}  # workload: training.MODELS' name
GRAPHS = training.CPU_GRAPHS  # the full-graph workloads' graphs
SIDES = ("dgl", "featgraph")  # DGL's own kernels; featgraph's under featgraph.dgl.use()
RGCN_SHAPE = "am"
MINIBATCH = minibatch.MODELS["sage"]  # 3 layers, 256 hidden, fan-out 15/10/5 from the seeds (DGL's: 5/10/15)
MINIBATCH_WARMUP = 3
ENTRY_POINT = "DGL entry point: "  # the profiler ranges around DGL's kernel entry points
BACKWARD = "autograd::engine::evaluate_function: "  # how the profiler names a gradient step
LOSS_RTOL = 1e-4  # float32 rounding: summation orders differ between the kernels


@dataclass
class Row:
    workload: str
    graph: str
    side: str  # "dgl" or "featgraph"
    nodes: int = 0
    edges: int = 0
    ms: float | None = None  # per training step: a full-graph epoch or a mini-batch
    seeds_s: float | None = None  # mini-batch only
    first_ms: float | None = None  # the first full-graph epoch: format building and kernel loading
    speedup: float | None = None  # DGL's ms / this row's ms
    peak_mb: float | None = None  # the median of the runs' peaks (``--runs``)
    peak_runs: list[float] = field(default_factory=list)  # each run's peak, in run order
    allocated_mb: float | None = None  # the bytes allocated at the peak (``measure.peaks_extra_mb``), median
    losses: list[float] = field(default_factory=list)  # the first two steps'
    kernel_ms: float | None = None  # of one profiled step, inside this side's kernels
    profiled_ms: float | None = None  # that profiled step
    kernel_speedup: float | None = None  # DGL's kernel_ms / this row's (featgraph's row)
    bound: float | None = None  # DGL's row: the speedup if featgraph's kernels took no time (Amdahl)
    served: int | None = None  # kernel calls featgraph served (featgraph's row)
    fallbacks: dict[str, dict[str, int]] = field(default_factory=dict)  # entry point: {reason: calls} to DGL's
    note: str = ""


@contextlib.contextmanager
def _entry_points_recorded() -> Iterator[set[int]]:
    """Every DGL kernel entry point ``featgraph.dgl`` knows (DGL's own or featgraph's, wherever bound) wrapped
    in a profiler range named ``ENTRY_POINT`` + its name, so a call's time counts whatever serves it (DGL's
    CPU ``gather_mm``, for one, is torch code, not one of its kernel functions). Yields the set that collects
    the sequence numbers of the autograd nodes the calls make (``created_nodes``), whose backward is theirs."""
    bound = routing.bound_entry_points() if import_dgl() is not None else []
    nodes: set[int] = set()
    patches = [
        (module, attribute, function, _recorded(ENTRY_POINT + entry.name, function, nodes))
        for entry, module, attribute, function in bound
    ]
    for module, attribute, _, wrapped in patches:
        setattr(module, attribute, wrapped)
    try:
        yield nodes
    finally:
        for module, attribute, function, _ in reversed(patches):
            setattr(module, attribute, function)


def _recorded(name: str, function: Any, nodes: set[int]) -> Any:
    def recorded(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(name):
            out = function(*args, **kwargs)
        nodes.update(created_nodes(out, (*args, *kwargs.values())))
        return out

    return recorded


def _tensors(values: Any) -> list[torch.Tensor]:
    """The tensors among ``values`` (a tensor, or a tuple or list of values, one level deep)."""
    items = values if isinstance(values, (tuple, list)) else (values,)
    return [item for item in items if isinstance(item, torch.Tensor)]


def created_nodes(outputs: Any, inputs: Any) -> set[int]:
    """Sequence numbers of the autograd nodes a call made: reachable from its outputs' nodes without passing
    through the nodes its inputs came with (a thread numbers its nodes in the order it makes them, so the call's
    are the ones numbered after every input's; leaves' accumulators are not the call's). The profiler names a
    node's backward with the same number; the number an operation records in the forward is only the next
    node's, which may be made after the call (a layer's ``mul`` right after ``gspmm``), so it cannot tell."""
    made_before = max((t.grad_fn._sequence_nr() for t in _tensors(inputs) if t.grad_fn is not None), default=-1)
    stack = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
    made: set[int] = set()
    while stack:
        node = stack.pop()
        if node is None or type(node).__name__ == "AccumulateGrad":
            continue
        number = node._sequence_nr()
        if number <= made_before or number in made:
            continue
        made.add(number)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return made


def _entry_point_of(event: Any) -> Any:
    """The outermost entry-point range ``event`` lies in (itself included), or None."""
    outermost = None
    while event is not None:
        if event.name.startswith(ENTRY_POINT):
            outermost = event
        event = event.cpu_parent
    return outermost


def kernel_time_us(events: Any, nodes: set[int]) -> float:
    """CPU time inside DGL's kernel entry points (outermost ranges) and in the backward of the autograd
    ``nodes`` they made (autograd's ``evaluate_function`` events carry the node's sequence number)."""

    def gradient_of_a_call(event: Any) -> bool:
        return event.name.startswith(BACKWARD) and event.sequence_nr in nodes and _entry_point_of(event) is None

    return sum(event.cpu_time_total for event in events if _entry_point_of(event) is event or gradient_of_a_call(event))


def profile_kernels(row: Row, step: Any) -> None:
    """Run ``step`` once under torch's profiler: its time and the time inside the kernels of ``row.side``
    (``kernel_time_us``: DGL's entry points however served, and their gradients) into ``row``."""
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with _entry_points_recorded() as nodes, torch.profiler.profile(activities=cpu) as profiler:
        start = time.perf_counter()
        step()
        row.profiled_ms = (time.perf_counter() - start) * 1e3
    kernel_us = kernel_time_us(profiler.events(), nodes)
    row.kernel_ms = kernel_us / 1e3


class Recorded(torch.nn.Module):
    """``net`` as ``training.epoch_ms`` calls it, keeping its first ``keep`` outputs (detached) so the losses of
    the first steps can be read after the timed loop without adding work to it."""

    def __init__(self, net: torch.nn.Module, keep: int = 2) -> None:
        super().__init__()
        self.net, self.keep, self.outputs = net, keep, []

    def forward(self, *args: Any) -> torch.Tensor:
        out = self.net(*args)
        if len(self.outputs) < self.keep:
            self.outputs.append(out.detach())
        return out


@dataclass
class Prepared:
    """A full-graph row's model, graph argument, features and labels, built from seeded generators so both
    sides get the same."""

    net: torch.nn.Module
    graph: object
    x: torch.Tensor
    y: torch.Tensor
    name: str
    nodes: int
    edges: int


def _full_graph(dgl: Any, workload: str, graph_name: str, scale: float) -> Prepared:
    """``bench train``'s model of ``workload`` with DGL's layers (``training.DGLNet``) on ``graph_name``."""
    g = training.GRAPHS[graph_name](scale)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(g.num_nodes, training.IN_FEATURES, generator=gen)
    y = torch.randint(0, training.CLASSES, (g.num_nodes,), generator=gen)
    model, overrides = training.MODELS[BENCH_MODELS[workload]]
    config = preset(model, **overrides)
    dg = dgl.graph(g.coo(), num_nodes=g.num_nodes)
    if model in ("gcn", "gat"):
        dg = dgl.add_self_loop(dgl.remove_self_loop(dg))
    torch.manual_seed(0)
    net = training.DGLNet(dgl, model, config.aggr, config.hidden, config.heads, config.dropout)
    return Prepared(net, dg, x, y, graph_name, dg.num_nodes(), dg.num_edges())


def _rgcn(dgl: Any, scale: float) -> Prepared:
    """``rgcn-train``'s DGL model (``RelGraphConv`` twice, mean per relation, edges sorted by relation) on the
    AM-shaped graph, its outputs on the training nodes."""
    data = entity_like(RGCN_SHAPE, scale)
    hg, relations = data.graph, data.graph.num_relations
    src, dst = hg.graph.edge_index
    counts = torch.zeros(hg.num_nodes * relations)
    slot = dst * relations + hg.etype
    counts.index_add_(0, slot, torch.ones_like(slot, dtype=torch.float32))
    norm = (1.0 / counts[slot]).unsqueeze(1)
    g = dgl.graph((src, dst), num_nodes=hg.num_nodes)
    torch.manual_seed(0)
    model = DglRGCN(dgl.nn.pytorch.RelGraphConv, data.x.shape[1], data.num_classes, relations)
    net = OnTrainingNodes(model, data.train_idx)
    return Prepared(net, (g, hg.etype, norm), data.x, data.y[data.train_idx], data.name, hg.num_nodes, hg.num_edges)


def _time_full_graph(row: Row, prepared: Prepared, repeat: int) -> None:
    """Two warm-up epochs and ``repeat`` timed ones (``training.epoch_ms``), their peak memory and the first two
    epochs' losses into ``row``."""
    net = Recorded(prepared.net)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    torch.manual_seed(1)  # the same dropout masks on both sides
    times: list[float] = []
    row.peak_mb, row.allocated_mb = peaks_extra_mb(lambda: times.extend(training.epoch_ms(
        net, prepared.graph, optimizer, prepared.x, prepared.y, repeat
    )))  # fmt: skip
    row.first_ms, row.ms = times
    row.losses = [float(F.cross_entropy(out, prepared.y)) for out in net.outputs]

    def epoch() -> None:
        optimizer.zero_grad()
        F.cross_entropy(net(prepared.x, prepared.graph), prepared.y).backward()
        optimizer.step()

    profile_kernels(row, epoch)


def _time_minibatch(row: Row, dgl: Any, data_path: str, batches: int) -> None:
    """DGL's sampler, loader and ``SAGEConv`` model (``minibatch.DGLSampledNet``) on the saved products-like graph:
    seeds/s over ``batches`` training steps after the warm-up, the peak memory (graph, sampler and training) and
    the first two batches' losses into ``row``."""
    raw = torch.load(data_path, weights_only=True)
    row.nodes, row.edges = int(raw["num_nodes"]), int(raw["src"].numel())
    torch.manual_seed(0)
    net = minibatch.DGLSampledNet(dgl, MINIBATCH, raw["x"].shape[1], int(raw["num_classes"]))
    optimizer = torch.optim.Adam(net.parameters(), lr=MINIBATCH.config.lr)
    losses: list[float] = []
    sizes: list[int] = []

    def step(batch: tuple[torch.Tensor, torch.Tensor, list]) -> None:
        x, y, blocks = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(net(blocks, x), y)
        loss.backward()
        optimizer.step()
        sizes.append(y.numel())
        if len(losses) < 2:
            losses.append(float(loss))

    def measure() -> float:
        graph = dgl.graph((raw["src"], raw["dst"]), num_nodes=raw["num_nodes"])
        sampler = dgl.dataloading.NeighborSampler(list(reversed(MINIBATCH.fanouts)))
        np.random.seed(0)  # DGL's DataLoader shuffles with NumPy's generator, its sampler draws from DGL's
        dgl.seed(0)
        torch.manual_seed(0)  # the same batches (at the same thread count) and dropout masks on both sides
        loader = dgl.dataloading.DataLoader(
            graph, raw["train_idx"], sampler, batch_size=minibatch.BATCH_SIZE, shuffle=True
        )
        stream: Iterator = (
            (raw["x"][inputs], raw["y"][seeds], blocks) for inputs, seeds, blocks in minibatch.endless(loader)
        )
        net.train()
        rate = minibatch.throughput(stream, batches, MINIBATCH_WARMUP, step, "wall", torch.device("cpu"))
        profile_kernels(row, lambda: step(next(stream)))  # a batch drawn and trained on, as each timed one
        sizes.pop()
        return rate.per_s

    rates: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DGL's CPU-affinity advice
        row.peak_mb, row.allocated_mb = peaks_extra_mb(lambda: rates.append(measure()))
    row.seeds_s = rates[0]
    row.ms = sum(sizes[MINIBATCH_WARMUP:]) / len(sizes[MINIBATCH_WARMUP:]) / row.seeds_s * 1e3  # per timed batch
    row.losses = losses


def run_one(
    workload: str, graph_name: str, scale: float, side: str, repeat: int, batches: int, threads: int, data_path: str
) -> Row:
    """One row, meant for a fresh process: ``workload`` on ``graph_name`` with DGL's kernels (``side`` "dgl") or
    featgraph's (``side`` "featgraph": the training runs under ``featgraph.dgl.use()``), on ``threads`` threads."""
    torch.set_num_threads(threads)
    row = Row(workload, graph_name, side)
    dgl = import_dgl()
    if dgl is None:
        row.note = "DGL does not import here"
        return row
    if workload in FULL_GRAPH:
        prepared = _full_graph(dgl, workload, graph_name, scale)
    elif workload == "rgcn":
        prepared = _rgcn(dgl, scale)
    else:
        prepared = None
    if prepared is not None:
        row.graph, row.nodes, row.edges = prepared.name, prepared.nodes, prepared.edges
    routing = featgraph_dgl.use() if side == "featgraph" else None
    featgraph_dgl.reset_calls()
    try:
        if prepared is None:
            _time_minibatch(row, dgl, data_path, batches)
        else:
            _time_full_graph(row, prepared, repeat)
    except (*minibatch.FAILURES, dgl.DGLError) as err:
        row.note = f"failed: {str(err)[:80]}"
    finally:
        if routing is not None:
            routing.close()
    if side == "featgraph":
        _count_calls(row, featgraph_dgl.calls())
    return row


def _count_calls(row: Row, calls: dict[str, dict[str, int]]) -> None:
    """featgraph's served calls and the fallbacks by entry point and reason into ``row``; a row featgraph served
    nothing in says so in its note."""
    row.served = sum(counts.get(FEATGRAPH, 0) for counts in calls.values())
    row.fallbacks = {
        entry: {reason: n for reason, n in counts.items() if reason != FEATGRAPH}
        for entry, counts in calls.items()
        if any(reason != FEATGRAPH for reason in counts)
    }
    if row.served == 0:
        row.note = "; ".join(filter(None, [row.note, "featgraph served no kernel call: DGL's kernels ran"]))


def fallbacks_cell(row: Row) -> str:
    """The fallbacks as "entry: reason xN" ("none" where every call was featgraph's, "-" on DGL's row)."""
    if row.served is None:
        return "-"
    listed = [f"{entry}: {reason} x{n}" for entry, counts in row.fallbacks.items() for reason, n in counts.items()]
    return "; ".join(listed) or "none"


def pair_rows(rows: list[Row]) -> None:
    """Each row's speedup over DGL's row of its workload and graph, and a note where its first losses differ
    from DGL's by more than float32 rounding or featgraph's row is slower or needs more memory than DGL's."""
    baseline = rows[0] if rows and rows[0].side == "dgl" else None
    for row in rows:
        if baseline is None or not baseline.ms or not row.ms:
            continue
        row.speedup = baseline.ms / row.ms
        if row is baseline:
            if row.kernel_ms is not None and row.profiled_ms and row.profiled_ms > row.kernel_ms:
                row.bound = row.profiled_ms / (row.profiled_ms - row.kernel_ms)
            continue
        if baseline.kernel_ms and row.kernel_ms:
            row.kernel_speedup = baseline.kernel_ms / row.kernel_ms
        if len(row.losses) != len(baseline.losses):
            continue
        worst = max(
            (abs(a - b) / max(abs(b), 1e-12) for a, b in zip(row.losses, baseline.losses, strict=True)), default=0.0
        )
        if worst > LOSS_RTOL:
            row.note = "; ".join(filter(None, [row.note, f"losses differ from DGL's by {worst:.1e} (relative)"]))


MEDIAN_FIELDS = ("ms", "seeds_s", "first_ms", "peak_mb", "allocated_mb", "kernel_ms", "profiled_ms")


def merged(runs: list[Row]) -> Row:
    """One side's row from its runs: the median of each measured field over the runs that have it, every run's
    peak memory listed, the rest (losses, calls, notes) the first run's. A run that failed makes the row
    failed: its note is the row's."""
    failed = [run for run in runs if run.ms is None]
    row = Row(**asdict(failed[0] if failed else runs[0]))
    if failed:
        return row
    for name in MEDIAN_FIELDS:
        values = [getattr(run, name) for run in runs if getattr(run, name) is not None]
        setattr(row, name, float(np.median(values)) if values else None)
    row.peak_runs = [run.peak_mb for run in runs if run.peak_mb is not None]
    return row


def run_pair(
    workload: str,
    graph_name: str,
    scale: float,
    repeat: int,
    batches: int,
    threads: int,
    data_path: str,
    runs: int = 1,
) -> list[Row]:
    """Both sides of one workload on one graph, each run in its own process (its own peak memory, no allocator or
    format caches shared), ``runs`` times with the sides taking turns (a slow spell or a noisy peak hits both
    alike), merged per side (``merged``)."""
    env = counting_allocations({**os.environ, "OMP_NUM_THREADS": str(threads)})
    by_side: dict[str, list[Row]] = {side: [] for side in SIDES}
    for _ in range(runs):
        for side in SIDES:
            spec = [workload, graph_name, scale, side, repeat, batches, threads, data_path]
            result = run_worker(__name__, spec, env)
            by_side[side].append(
                Row(workload, graph_name, side, note=result) if isinstance(result, str) else Row(**result)
            )
    rows = [merged(by_side[side]) for side in SIDES]
    pair_rows(rows)
    return rows


def _losses_cell(row: Row) -> str:
    return ", ".join(f"{loss:.6f}" for loss in row.losses) or "-"


TABLE = Table({
    "workload": "workload", "graph": lambda r: f"{r.graph} ({r.nodes:,} nodes, {r.edges:,} edges)",
    "kernels": lambda r: "featgraph (featgraph.dgl.use())" if r.side == "featgraph" else "DGL's own",
    "ms/step": "ms:.1f", "seeds/s": "seeds_s:,.0f", "DGL time / this": "speedup:.2f", "peak MB": "peak_mb:,.0f",
    "peak MB, each run": lambda r: ", ".join(f"{peak:,.0f}" for peak in r.peak_runs) or "-",
    "allocated MB": "allocated_mb:,.0f",
    "kernel ms": "kernel_ms:.1f", "kernels: DGL / this": "kernel_speedup:.2f",
    "bound (kernels free)": "bound:.2f", "losses (steps 1, 2)": _losses_cell, "featgraph calls": "served",
    "fallbacks to DGL": fallbacks_cell, "note": "note",
})  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument(
        "--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS), help="the full-graph workloads' graphs"
    )
    parser.add_argument("--batches", type=int, default=20, help="timed mini-batches (after 3 warm-up batches)")
    parser.add_argument(
        "--runs", type=int, default=1,
        help="processes per side, the sides taking turns; each field the median over them (peak memory moves "
        "20-90 MB between runs of one side)",
    )  # fmt: skip
    add_common_arguments(
        parser, repeat=3, threads=toolchain.num_threads(), scale=1.0,
        scale_help="shrink rand100k-2.9M, the AM-shaped graph and products-like, in (0, 1]",
    )  # fmt: skip


def _pairs(args: argparse.Namespace, products: str) -> Iterator[tuple[str, str]]:
    """(workload, graph) in the order the table lists them; ``products`` names the mini-batch graph."""
    for workload in args.workloads:
        if workload in FULL_GRAPH:
            yield from ((workload, graph_name) for graph_name in args.graphs)
        else:
            yield workload, f"{RGCN_SHAPE}-like" if workload == "rgcn" else products


def run(args: argparse.Namespace) -> list[Row]:
    threads = toolchain.checked_threads(args.threads, "--threads")
    if args.runs < 1:
        raise ValueError(f"--runs must be >= 1, got {args.runs}")
    print(f"machine: {machine()}; {threads} threads per worker; {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(
        f"full-graph epochs: median of {args.repeat} after 2 warm-up; mini-batch: {args.batches} batches of "
        f"{minibatch.BATCH_SIZE} after {MINIBATCH_WARMUP}; scale {args.scale:g}; {args.runs} run(s) a side, "
        "taking turns, medians",
        flush=True,
    )
    print(TABLE.header, flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="featgraph-dgl-bench-") as directory:
        data_path, products = "", "products-like"
        if "minibatch" in args.workloads:
            path, described = minibatch.write_graph(args.scale, Path(directory))
            data_path, products = str(path), described.split(":")[0]
        for workload, graph_name in _pairs(args, products):
            batch = run_pair(workload, graph_name, args.scale, args.repeat, args.batches, threads, data_path, args.runs)
            print(TABLE.rows(batch), flush=True)
            rows += batch
    write_json(args.json, [asdict(r) for r in rows], scale=args.scale, threads=threads, runs=args.runs)
    return rows


if __name__ == "__main__":  # the worker: one row as JSON on the last line of stdout
    print(json.dumps(asdict(run_one(*json.loads(sys.argv[1])))))
