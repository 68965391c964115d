"""``featgraph bench minibatch``: mini-batch training throughput on the products-like graph (ogbn-products'
shape), featgraph's loader and layers against PyG's layers and DGL's sampler and layers, in the same run.

Models: GraphSAGE (mean, 3 layers, hidden 256, fan-out 15/10/5) and GAT (2 layers, 4 heads x 64, fan-out
10/10), batches of 1024 training vertices; fan-outs are per hop from the seeds (PyG's order; DGL's sampler
takes the list reversed, input layer first). Frameworks:

- ``featgraph``: featgraph's ``BlockLoader`` and layers (``training.minibatch.SampledClassifier``);
- ``featgraph-pyg``: the same loader and model code with PyG's layers;
- ``dgl``: DGL's ``NeighborSampler``, ``DataLoader`` and layers (GAT: self loops added to the graph, as DGL's
  examples do), where DGL imports;
- ``pyg``: PyG's ``NeighborLoader`` and layers on its flat ``edge_index``, where pyg-lib or torch-sparse
  imports (PyG's sampler needs one).

Per row: seeds per second sampling alone (batches with their features and labels gathered) and training
(sample + forward + backward + Adam step), over ``--batches`` batches after ``--warmup``, by the wall clock
or (``--clock cpu``) by the worker's CPU time, all its threads', which other jobs on the machine disturb less;
``format share``:
the part of a training step spent turning the sampler's output into what the kernels read (formats,
self-loop graphs, kernels bound to a block), measured as a fresh batch's forward + backward minus the same
batch's again, once that work is cached on its graphs, with no batch prepared meanwhile (featgraph's loader
otherwise samples the next batch in a thread while a step runs, and on 2 cores that contention read as format
work: 16-18% for GraphSAGE where the same steps without it showed none); peak memory above the raw edges and
features (graph structures, sampler, batches and training included); ``wait share``: the part of the training
loop's wall time spent obtaining the next batch (sampling it, or waiting for the loader's thread, and its copy to
the device), the time the layers wait for their input. Each row runs in its own process, so peaks are its own;
the graph is generated once per run and handed to the workers in a file.

``--device cuda`` keeps the sampling on the CPU (``--threads`` per worker) and trains on the GPU, as large graphs
are usually trained: the model and optimizer live there, featgraph's loaders and PyG's put each batch in pinned
memory, and every framework's batch (features, labels, blocks or edges) is copied there without blocking
(``moved``) before its step, the device synchronized at each timing boundary so the clock reads finished work.
The sampling rate then includes that copy, and peak memory is the GPU's above what the model holds there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from ..datasets import products_like
from ..graph import Graph
from ..graph.interop import import_dgl
from ..loader import BlockLoader
from ..native import toolchain
from ..training import Preset
from ..training.minibatch import SampledClassifier, minibatch_preset
from ..training.models import activation
from .measure import peak_extra_mb
from .report import Table, add_common_arguments, device_name, machine, run_worker, write_json

BATCH_SIZE = 1024
FORMAT_BATCHES = 5  # fresh batches (at most --batches) whose first and repeated steps give the format share


@dataclass(frozen=True)
class BenchModel:
    model: str
    fanouts: tuple[int, ...]
    config: Preset


MODELS = {
    "sage": BenchModel("sage", (15, 10, 5), minibatch_preset("sage", aggr="mean")),  # hidden 256
    "gat": BenchModel("gat", (10, 10), minibatch_preset("gat")),  # 4 heads x 64
}
FRAMEWORKS = {
    "featgraph": "featgraph loader + featgraph layers",
    "featgraph-pyg": "featgraph loader + PyG layers",
    "dgl": "DGL sampler + DGL layers",
    "pyg": "PyG NeighborLoader + PyG layers",
}


@dataclass
class Row:
    model: str
    framework: str
    sample_seeds_s: float | None = None  # sampling alone
    train_seeds_s: float | None = None  # sample + forward + backward + optimizer step
    format_share: float | None = None  # of a training step
    wait_share: float | None = None  # of the training loop's wall time, obtaining the next batch on the device
    format_ops: list | None = None  # (host operator, ms per batch) a fresh batch spends more on than a repeat
    peak_mb: float | None = None
    sample_vs_dgl: float | None = None  # seeds/s over DGL's in the same run
    train_vs_dgl: float | None = None
    note: str = ""


SampledBatch = tuple[torch.Tensor, torch.Tensor, Any]  # input rows, seeds' labels, the model's graph input


@dataclass
class Pipeline:
    """One framework's way from the graph to a training step: ``batches(background)`` iterates batches epoch
    after epoch without end (``background=False``: none prepared while a step runs; DGL's and PyG's loaders
    here always sample in the caller's thread), ``forward(x, graph_input)`` gives the seeds' logits."""

    batches: Callable[[bool], Iterator[SampledBatch]]
    forward: Callable[[torch.Tensor, Any], torch.Tensor]


class DGLSampledNet(torch.nn.Module):
    """``SampledClassifier``'s GraphSAGE and GAT with DGL's layers: dropout before each layer, the model's
    activation between layers, GAT's hidden layers concatenating heads and its output layer one head."""

    def __init__(self, dgl: Any, bench: BenchModel, in_channels: int, num_classes: int) -> None:
        super().__init__()
        nn, config = dgl.nn.pytorch, bench.config
        self.model, self.dropout, self.activation = bench.model, config.dropout, activation(bench.model)
        self.convs = torch.nn.ModuleList()
        width, num_layers = in_channels, len(bench.fanouts)
        for depth in range(num_layers):
            last = depth == num_layers - 1
            if bench.model == "sage":
                out = num_classes if last else config.hidden
                self.convs.append(nn.SAGEConv(width, out, config.aggr))
                width = out
            else:
                out, heads = (num_classes, 1) if last else (config.hidden, config.heads)
                self.convs.append(nn.GATConv(width, out, heads, attn_drop=config.dropout, allow_zero_in_degree=True))
                width = out * heads

    def forward(self, blocks: list, x: torch.Tensor) -> torch.Tensor:
        h = x
        for depth, (conv, block) in enumerate(zip(self.convs, blocks, strict=True)):
            h = conv(block, F.dropout(h, self.dropout, self.training))
            h = h.flatten(1) if self.model == "gat" else h
            if depth < len(self.convs) - 1:
                h = self.activation(h)
        return h


def endless(loader: Iterable) -> Iterator:
    """The loader's batches, epoch after epoch, without end."""
    while True:
        yield from loader


def _featgraph(raw: dict, bench: BenchModel, net: SampledClassifier, pin: bool) -> Pipeline:
    graph = Graph(raw["src"], raw["dst"], raw["num_nodes"])

    def batches(background: bool) -> Iterator[SampledBatch]:
        loader = BlockLoader(
            graph,
            list(bench.fanouts),
            BATCH_SIZE,
            input_nodes=raw["train_idx"],
            seed=0,
            x=raw["x"],
            y=raw["y"],
            prefetch=2 if background else 0,
            pin_memory=pin,
            self_loops=net.loops_blocks,
        )
        return ((b.x, b.y, b.blocks) for b in endless(loader))

    return Pipeline(batches, net)


def _dgl(raw: dict, bench: BenchModel, dgl: Any, net: torch.nn.Module) -> Pipeline:
    graph = dgl.graph((raw["src"], raw["dst"]), num_nodes=raw["num_nodes"])
    if bench.model == "gat":
        graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
    sampler = dgl.dataloading.NeighborSampler(list(reversed(bench.fanouts)))
    loader = dgl.dataloading.DataLoader(graph, raw["train_idx"], sampler, batch_size=BATCH_SIZE, shuffle=True)
    x, y = raw["x"], raw["y"]

    def batches(background: bool) -> Iterator[SampledBatch]:
        return ((x[input_nodes], y[seeds], blocks) for input_nodes, seeds, blocks in endless(loader))

    return Pipeline(batches, lambda h, blocks: net(blocks, h))


def _pyg(raw: dict, bench: BenchModel, net: SampledClassifier, pin: bool) -> Pipeline:
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    data = Data(x=raw["x"], y=raw["y"], edge_index=torch.stack([raw["src"], raw["dst"]]), num_nodes=raw["num_nodes"])
    loader = NeighborLoader(
        data, list(bench.fanouts), batch_size=BATCH_SIZE, input_nodes=raw["train_idx"], shuffle=True, pin_memory=pin
    )

    def forward(h: torch.Tensor, graph_input: tuple[torch.Tensor, int]) -> torch.Tensor:
        """PyG's usual mini-batch forward: every layer over the whole sampled subgraph, the seeds' rows kept."""
        edge_index, num_seeds = graph_input
        for depth, conv in enumerate(net.convs):
            h = conv(net.drop(h, net.dropout, net.training), edge_index)
            h = h if depth == len(net.convs) - 1 else net.activation(h)
        return h[:num_seeds]

    def batches(background: bool) -> Iterator[SampledBatch]:
        return ((b.x, b.y[: b.batch_size], (b.edge_index, b.batch_size)) for b in endless(loader))

    return Pipeline(batches, forward)


def unavailable(framework: str) -> str:
    """Why ``framework`` cannot run here, or "" where it can."""
    if framework in ("featgraph-pyg", "pyg"):
        try:
            import torch_geometric.typing as pyg_typing
        except ImportError:
            return "PyG not installed"
        if framework == "pyg" and not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
            return "PyG's NeighborLoader needs pyg-lib or torch-sparse; neither imports here"
    if framework == "dgl" and import_dgl() is None:
        return "DGL does not import here"
    return ""


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
FAILURES = (RuntimeError, NotImplementedError, TypeError, ValueError, ImportError)


def failures(dgl: Any) -> tuple[type[Exception], ...]:
    """The errors a row reports in its note instead of ending its worker: a baseline path that fails, and
    DGL's own where DGL runs (its CPU build asked for a GPU)."""
    return FAILURES if dgl is None else (*FAILURES, dgl.DGLError)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on a CUDA ``device``, so a clock read after it counts that work (nothing to
    wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def moved(value: Any, device: torch.device) -> Any:
    """``value`` on ``device``, each copy queued without blocking the host (from pinned memory it overlaps the
    host's work): a list or tuple (a named one too) item by item; a tensor, or anything else with ``to`` (a
    featgraph graph or block, a DGL graph or block), by its ``to``; other values (counts) as they are."""
    if isinstance(value, list):
        return [moved(item, device) for item in value]
    if isinstance(value, tuple):
        items = [moved(item, device) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value.to(device, non_blocking=True) if hasattr(value, "to") else value


def next_batch(batches: Iterator[Any], device: torch.device) -> Any:
    """The next batch, on ``device`` with its copies finished (on the CPU, as the loader gives it)."""
    batch = next(batches)
    if device.type == "cpu":
        return batch
    batch = moved(batch, device)
    synchronize(device)
    return batch


@dataclass(frozen=True)
class Rate:
    """Seeds (or edges) per second of a loop over batches, and the share of its wall time spent obtaining
    each next batch on the device (sampling it or waiting for the loader, and the copy)."""

    per_s: float
    wait_share: float


def throughput(
    batches: Iterator[Any],
    count: int,
    warmup: int,
    work: Callable[[Any], Any],
    clock: str,
    device: torch.device,
    size: Callable[[Any], int] = lambda batch: batch[1].numel(),
) -> Rate:
    """``work``'s rate over ``count`` batches after ``warmup``, each batch taken to ``device`` first: seeds
    per second by ``clock`` (``size`` counts a batch's seeds, by default its labels, the second item), and
    the wait share by the wall clock (the time the device waits is wall time). The device is synchronized
    after each batch's copy and each ``work``, so both parts are timed to their finished work."""
    now = CLOCKS[clock]
    for _ in range(warmup):
        work(next_batch(batches, device))
    synchronize(device)
    seeds, waited, start, wall = 0, 0.0, now(), time.perf_counter()
    for _ in range(count):
        before = time.perf_counter()
        batch = next_batch(batches, device)
        waited += time.perf_counter() - before
        work(batch)
        synchronize(device)
        seeds += size(batch)
    return Rate(seeds / (now() - start), waited / (time.perf_counter() - wall))


def _format_ms(
    batches: Iterator[SampledBatch],
    count: int,
    forward: Callable,
    net: torch.nn.Module,
    clock: str,
    device: torch.device,
) -> float:
    """Median over ``count`` fresh batches (each on ``device``) of (first forward + backward) - (fastest of two
    repeats on the same batch), by ``clock``, each timed to its finished work."""
    now = CLOCKS[clock]
    differences = []
    for _ in range(count):
        x, y, graph_input = next_batch(batches, device)
        times = []
        for _ in range(3):
            start = now()
            net.zero_grad()
            F.cross_entropy(forward(x, graph_input), y).backward()
            synchronize(device)
            times.append(now() - start)
        differences.append(times[0] - min(times[1:]))
    return max(0.0, statistics.median(differences)) * 1e3


def format_ops(
    batches: Iterator[SampledBatch], count: int, forward: Callable, net: torch.nn.Module, device: torch.device, top: int
) -> list[tuple[str, float]]:
    """The ``top`` host operators whose self time a fresh batch's first forward + backward exceeds a repeat's
    by the most, over ``count`` fresh batches under ``torch.profiler``: (operator, ms per batch), where the
    format share goes (sorts, counts, synchronising reads such as ``aten::item``)."""
    passes: list[Counter] = [Counter(), Counter()]  # first, repeat
    for _ in range(count):
        x, y, graph_input = next_batch(batches, device)
        for totals in passes:
            with profile(activities=[ProfilerActivity.CPU]) as profiled:
                net.zero_grad()
                F.cross_entropy(forward(x, graph_input), y).backward()
                synchronize(device)
            for event in profiled.key_averages():
                totals[event.key] += event.self_cpu_time_total / 1e3 / count
    first, repeat = passes
    extra = ((op, first[op] - repeat[op]) for op in first)
    return sorted((item for item in extra if item[1] > 0), key=lambda item: -item[1])[:top]


def run_one(
    data_path: str, bench_model: str, framework: str, batches: int, warmup: int, clock: str = "wall",
    device: str = "cpu", top_ops: int = 0,
) -> Row:  # fmt: skip
    """One row, meant for a fresh process; ``clock`` "cpu" times by the process's CPU time (every thread's,
    the loader's included), which other processes on a shared machine disturb less than the wall clock;
    ``device``: where the model trains (the batches are sampled on the CPU and copied there); ``top_ops``: that
    many of the host operators behind the format share (``format_ops``), none where 0."""
    row = Row(bench_model, framework)
    row.note = unavailable(framework)
    if row.note:
        return row
    where, bench = torch.device(device), MODELS[bench_model]
    raw = torch.load(data_path, weights_only=True)
    in_channels, num_classes = raw["x"].shape[1], int(raw["num_classes"])
    dgl = import_dgl() if framework == "dgl" else None
    torch.manual_seed(0)
    if dgl is not None:
        net: torch.nn.Module = DGLSampledNet(dgl, bench, in_channels, num_classes)
    else:
        backend = "featgraph" if framework == "featgraph" else "pyg"
        net = SampledClassifier(bench.model, in_channels, num_classes, len(bench.fanouts), bench.config, backend)
    net.to(where)
    optimizer = torch.optim.Adam(net.parameters(), lr=bench.config.lr)  # before the baseline: imports torch._dynamo
    pin = where.type == "cuda"

    def measure() -> None:
        if framework in ("featgraph", "featgraph-pyg"):
            pipeline = _featgraph(raw, bench, net, pin)
        elif framework == "dgl":
            pipeline = _dgl(raw, bench, dgl, net)
        else:
            pipeline = _pyg(raw, bench, net, pin)

        def step(batch: SampledBatch) -> None:
            x, y, graph_input = batch
            optimizer.zero_grad()
            F.cross_entropy(pipeline.forward(x, graph_input), y).backward()
            optimizer.step()

        net.train()
        stream = pipeline.batches(True)
        row.sample_seeds_s = throughput(stream, batches, warmup, lambda batch: None, clock, where).per_s
        stream.close()
        stream = pipeline.batches(True)
        training = throughput(stream, batches, warmup, step, clock, where)
        row.train_seeds_s, row.wait_share = training.per_s, training.wait_share
        stream.close()
        stream = pipeline.batches(False)
        format_ms = _format_ms(stream, min(batches, FORMAT_BATCHES), pipeline.forward, net, clock, where)
        row.format_share = format_ms / (BATCH_SIZE / row.train_seeds_s * 1e3)
        if top_ops > 0:
            row.format_ops = format_ops(stream, min(batches, FORMAT_BATCHES), pipeline.forward, net, where, top_ops)
        stream.close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DGL's CPU-affinity advice, PyG's deprecations
        try:
            row.peak_mb = peak_extra_mb(measure, where)
        except failures(dgl) as err:
            return Row(bench_model, framework, note=f"failed: {str(err)[:80]}")
    return row


def run_rows(
    data_path: str,
    bench_model: str,
    frameworks: list[str],
    batches: int,
    warmup: int,
    threads: int,
    clock: str = "wall",
    device: str = "cpu",
    top_ops: int = 0,
) -> list[Row]:
    """Each framework in its own process, on ``threads`` threads (OpenMP's and torch's), training on
    ``device``, with ``top_ops`` of the operators behind each row's format share."""
    rows = []
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    for framework in frameworks:
        spec = [data_path, bench_model, framework, batches, warmup, clock, device, top_ops]
        row = run_worker("featgraph.bench.minibatch", spec, env)
        rows.append(Row(bench_model, framework, note=row) if isinstance(row, str) else Row(**row))
    dgl = next((r for r in rows if r.framework == "dgl" and r.train_seeds_s), None)
    for r in rows:
        if dgl is not None and r.train_seeds_s:
            r.sample_vs_dgl = r.sample_seeds_s / dgl.sample_seeds_s
            r.train_vs_dgl = r.train_seeds_s / dgl.train_seeds_s
    return rows


TABLE = Table({
    "model": "model", "framework": lambda r: FRAMEWORKS[r.framework], "sampling seeds/s": "sample_seeds_s:,.0f",
    "training seeds/s": "train_seeds_s:,.0f", "sampling / DGL": "sample_vs_dgl:.2f",
    "training / DGL": "train_vs_dgl:.2f", "format share": "format_share:.0%", "wait share": "wait_share:.0%",
    "peak MB": "peak_mb:,.0f", "note": "note",
})  # fmt: skip


def write_graph(scale: float, directory: Path) -> tuple[Path, str]:
    """products-like at ``scale``, generated once, saved for the workers: (file, a line describing it)."""
    dataset = products_like(scale, seed=0)
    src, dst = dataset.graph.coo()
    path = directory / "graph.pt"
    torch.save(
        {
            "src": src, "dst": dst, "num_nodes": dataset.graph.num_nodes, "x": dataset.features, "y": dataset.labels,
            "train_idx": dataset.train_idx, "num_classes": dataset.num_classes,
        },
        path,
    )  # fmt: skip
    described = (
        f"{dataset.name}: {dataset.graph.num_nodes:,} vertices, {dataset.graph.num_edges:,} edges, "
        f"{dataset.features.shape[1]} features, {dataset.num_classes} classes, {dataset.train_idx.numel():,} "
        "training vertices"
    )
    return path, described


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=list(FRAMEWORKS))
    parser.add_argument("--batches", type=int, default=20, help="timed batches per measurement")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches before them")
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="time by the wall clock, or by each worker's CPU time (steadier on a machine other jobs load)",
    )
    parser.add_argument(
        "--device", default="cpu", help="where the layers train: cpu (default) or cuda; the sampling stays on the CPU"
    )
    parser.add_argument(
        "--format-ops", type=int, default=0, metavar="N",
        help="list the N host operators a fresh batch's step spends more time on than a repeat (the format share)",
    )  # fmt: skip
    add_common_arguments(
        parser, threads=toolchain.num_threads(), scale=1.0, scale_help="shrink the products-like graph, in (0, 1]"
    )


def run(args: argparse.Namespace) -> list[Row]:
    threads = toolchain.checked_threads(args.threads, "--threads")
    device = device_name(args.device)
    print(
        f"machine: {machine()}; device: {device}; {threads} threads per worker; {args.clock} clock; "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="featgraph-minibatch-") as directory:
        path, described = write_graph(args.scale, Path(directory))
        print(f"graph {described}; batches of {BATCH_SIZE}, {args.batches} timed after {args.warmup}", flush=True)
        print(TABLE.header, flush=True)
        for bench_model in args.models:
            batch = run_rows(
                str(path), bench_model, args.frameworks, args.batches, args.warmup, threads, args.clock, args.device,
                args.format_ops,
            )  # fmt: skip
            print(TABLE.rows(batch), flush=True)
            for row in batch:
                if row.format_ops:
                    listed = ", ".join(f"{op} {ms:.2f}" for op, ms in row.format_ops)
                    print(f"format ops, {row.model} / {row.framework} (ms per batch): {listed}", flush=True)
            rows += batch
    write_json(args.json, [asdict(r) for r in rows], device=device, scale=args.scale, threads=threads, clock=args.clock)
    return rows


if __name__ == "__main__":  # the worker: one row as JSON on the last line of stdout
    print(json.dumps(asdict(run_one(*json.loads(sys.argv[1])))))
