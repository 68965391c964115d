"""``featgraph bench distributed``: full-graph training across processes on the products-like graph
(ogbn-products' shape, ``--scale`` of it), and a model of an epoch on N machines for a papers100M-sized graph.

Partition rows: for METIS and random partitioning into 2 and 4 parts, the edge cut, the halo (rows a part
reads from other parts, summed over parts) and the halo bytes one epoch moves: the second layer's input rows
forward and their gradients back (``PartClassifier`` fetches the first layer's feature rows once, before
the first epoch; that one-time volume is its own column). A reference row, "by class": the generator's planted
communities (its classes, packed into parts of near-equal size), the partition its homophilous edges favour;
its halo is what the graph's other edges leave, since they join uniformly drawn vertices.

Timing rows: seconds per epoch (forward, backward, step; median after the first) of ``featgraph.distributed``'s
``Trainer`` in 1, 2 and 4 processes joined by gloo on 127.0.0.1, ``--threads`` split evenly among them (at
least one each), for each partitioning method; the slowest rank's median, since every step waits for all.

Model rows: an epoch on N machines of a papers100M-sized graph (111M vertices, 1.6B edges) = compute per
machine + its halo bytes / network bandwidth. Compute: this run's one-process seconds per edge times the
edges a machine holds (machines like this one); halo: the measured halo rows per vertex, extrapolated in
log2 N from the 2- and 4-part partitions (at most N - 1 per vertex), times the exchange's row bytes, each
machine moving its 1/N share over its own link. An estimate: it ignores the gradient all-reduce (the
parameters, a few hundred KB) and overlap of transfers with compute.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import statistics
import tempfile
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..datasets import products_like
from ..distributed import load_part, partition, save_parts
from ..distributed.trainer import PartClassifier, Trainer
from ..native import toolchain
from ..training.models import preset
from .report import cell, machine, markdown_header, markdown_row, write_json

PROCESSES = (1, 2, 4)
METHODS = ("metis", "random")
PLANTED = "by class"  # a reference partition, not a method: the products-like generator's planted classes
MODELS = ("sage", "gcn")
PAPERS_NODES, PAPERS_EDGES = 111_059_956, 1_615_685_872
FLOAT_BYTES = 4


@dataclass(frozen=True)
class PartitionRow:
    method: str
    parts: int
    edge_cut: int
    cut_share: float  # of all edges
    halo_rows: int  # summed over parts
    halo_bytes_per_epoch: int  # hidden rows forward and their gradients back
    feature_bytes_once: int  # the first layer's halo feature rows, fetched before the first epoch


@dataclass(frozen=True)
class TimingRow:
    method: str
    processes: int
    threads_each: int
    epoch_seconds: float


@dataclass(frozen=True)
class ModelRow:
    method: str
    machines: int
    compute_seconds: float
    halo_bytes: float  # per epoch, all machines together
    epoch_seconds: dict[str, float]  # per bandwidth, "10 Gbit/s" -> seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=0.02, help="products-like's size (1.0: 2.4M vertices)")
    parser.add_argument("--model", choices=MODELS, default="sage")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=6, help="per timing row; the first is not counted")
    parser.add_argument("--threads", type=int, default=toolchain.num_threads(), help="all processes together")
    parser.add_argument("--bandwidth", type=float, nargs="+", default=[10.0, 100.0], help="Gbit/s, model rows")
    parser.add_argument("--machines", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="model rows")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> dict:
    if args.epochs < 2:
        raise ValueError(f"--epochs must be >= 2 (the first is not timed), got {args.epochs}")
    if args.threads < 1 or args.hidden < 1:
        raise ValueError("--threads and --hidden must be >= 1")
    data = products_like(args.scale)
    graph, n = data.graph, data.graph.num_nodes
    print(f"products-like at scale {args.scale:g}: {n} vertices, {graph.num_edges} edges; {machine()}", flush=True)
    masks = {}
    for name, index in (("train", data.train_idx), ("val", data.val_idx), ("test", data.test_idx)):
        masks[name] = torch.zeros(n, dtype=torch.bool)
        masks[name][index] = True
    exchange_width = args.hidden if args.model == "sage" else data.num_classes  # GCN exchanges W x: class-wide
    partitions, timings = [], []
    with tempfile.TemporaryDirectory() as scratch:
        print(
            markdown_header(
                "method", "parts", "edge cut", "cut share", "halo rows", "halo MB/epoch", "features MB once"
            )
        )
        directories = {}
        for method in (*METHODS, PLANTED):
            for parts in PROCESSES[1:] if method == PLANTED else PROCESSES:
                directory = Path(scratch) / f"{method}-{parts}"
                owner = by_class(data.labels, parts) if method == PLANTED else partition(graph, parts, method)
                meta = save_parts(directory, graph, owner, data.features, data.labels, masks, method)
                directories[method, parts] = directory
                if parts == 1:
                    continue
                halo = sum(p["halo"] for p in meta["parts"])
                row = PartitionRow(
                    method, parts, meta["edge_cut"], meta["edge_cut"] / graph.num_edges, halo,
                    2 * halo * exchange_width * FLOAT_BYTES, halo * data.features.shape[1] * FLOAT_BYTES,
                )  # fmt: skip
                partitions.append(row)
                print(markdown_row([
                    method, parts, row.edge_cut, cell(row.cut_share, ".3f"), halo,
                    cell(row.halo_bytes_per_epoch / 1e6, ".1f"), cell(row.feature_bytes_once / 1e6, ".1f"),
                ]), flush=True)  # fmt: skip
        print(markdown_header("method", "processes", "threads each", "s/epoch", "vs 1 process"))
        runs = [("one part", 1), *((method, parts) for method in METHODS for parts in PROCESSES if parts > 1)]
        for method, processes in runs:
            threads = max(1, args.threads // processes)
            directory = directories["metis" if processes == 1 else method, processes]
            seconds = time_epochs(directory, processes, threads, args, data.num_classes)
            timings.append(TimingRow(method, processes, threads, seconds))
            ratio = seconds / timings[0].epoch_seconds
            print(markdown_row([method, processes, threads, cell(seconds, ".3f"), cell(ratio, ".2f")]), flush=True)
    models = model_rows(partitions, timings, graph.num_nodes, graph.num_edges, exchange_width, args)
    columns = [f"s/epoch @ {b:g} Gbit/s" for b in args.bandwidth]
    print(f"model: papers100M-sized ({PAPERS_NODES} vertices, {PAPERS_EDGES} edges), {args.model} hidden {args.hidden}")
    print(markdown_header("method", "machines", "compute s", "halo GB/epoch", *columns))
    for row in models:
        cells = [cell(row.epoch_seconds[c], ".2f") for c in columns]
        print(
            markdown_row(
                [row.method, row.machines, cell(row.compute_seconds, ".2f"), cell(row.halo_bytes / 1e9, ".2f"), *cells]
            )
        )
    result = {
        "partitions": [asdict(r) for r in partitions],
        "timings": [asdict(r) for r in timings],
        "model": [asdict(r) for r in models],
    }
    write_json(
        args.json, result["timings"], scale=args.scale, gnn=args.model, hidden=args.hidden,
        partitions=result["partitions"], machines_model=result["model"],
    )  # fmt: skip
    return result


def by_class(labels: torch.Tensor, num_parts: int) -> torch.Tensor:
    """Each vertex's part when whole classes go to parts, largest class first to the part with fewest vertices."""
    sizes = torch.bincount(labels)
    load, part_of_class = [0] * num_parts, torch.zeros(sizes.numel(), dtype=torch.int64)
    for label in torch.argsort(sizes, descending=True, stable=True).tolist():
        lightest = min(range(num_parts), key=load.__getitem__)
        part_of_class[label], load[lightest] = lightest, load[lightest] + int(sizes[label])
    return part_of_class[labels]


def model_rows(
    partitions: list[PartitionRow], timings: list[TimingRow], num_nodes: int, num_edges: int, width: int,
    args: argparse.Namespace,
) -> list[ModelRow]:  # fmt: skip
    """Epoch seconds on each of ``args.machines`` for a papers100M-sized graph, per partitioning method."""
    per_edge = timings[0].epoch_seconds / num_edges  # the one-process row
    rows = []
    for method in METHODS:
        measured = {r.parts: r.halo_rows / num_nodes for r in partitions if r.method == method}  # per vertex
        slope = measured[4] - measured[2]  # per doubling
        for machines in args.machines:
            if machines == 1:
                halo_per_vertex = 0.0
            else:
                halo_per_vertex = min(measured[2] + slope * (math.log2(machines) - 1), machines - 1)
            halo_bytes = 2 * halo_per_vertex * PAPERS_NODES * width * FLOAT_BYTES
            compute = per_edge * PAPERS_EDGES / machines
            seconds = {
                f"s/epoch @ {b:g} Gbit/s": compute + halo_bytes / machines / (b * 1e9 / 8) for b in args.bandwidth
            }
            rows.append(ModelRow(method, machines, compute, halo_bytes, seconds))
    return rows


def time_epochs(directory: Path, processes: int, threads: int, args: argparse.Namespace, num_classes: int) -> float:
    """Median seconds per epoch after the first, of the slowest rank, training on the parts in ``directory``."""
    with tempfile.TemporaryDirectory() as out:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.start_processes(
            _timed_rank,
            (processes, port, directory, Path(out), threads, args.model, args.hidden, args.epochs, num_classes),
            nprocs=processes,
            start_method="spawn",  # a fork of a process whose OpenMP threads ran can deadlock in them
        )
        return max(torch.load(Path(out) / f"rank-{rank}.pt") for rank in range(processes))


def _timed_rank(
    rank: int, world_size: int, port: int, directory: Path, out: Path, threads: int, model: str, hidden: int,
    epochs: int, num_classes: int,
) -> None:  # fmt: skip
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=timedelta(minutes=10)
    )
    try:
        part = load_part(directory, rank, world_size)
        config = preset(model, hidden=hidden, dropout=0.0, epochs=epochs)
        torch.manual_seed(0)
        trainer = Trainer(PartClassifier(model, part, num_classes, config), part, config)
        trainer.fit(epochs)
        torch.save(statistics.median(r.seconds for r in trainer.history[1:]), out / f"rank-{rank}.pt")
    finally:
        dist.destroy_process_group()
