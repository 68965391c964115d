"""``featgraph bench linkpred``: mini-batch link-prediction training throughput on the products-like graph,
featgraph's loader and layers against PyG's layers on the same batches and DGL's edge-prediction path, in the
same run.

The graph's edges are split as ``featgraph train --task link`` splits them (``training.linkpred.split_edges``);
each batch takes 1024 training edges and one negative each, samples GraphSAGE's neighbourhoods (mean, 3
layers of 256, fan-out 15/10/5 by default) around their endpoints and scores every pair by the dot product of
its endpoints' embeddings, under binary cross-entropy. The negative is by default the positive's source with
a uniform random destination, as DGL's sampler draws it (``--negatives triplet``); ``--negatives binary``
draws a random pair instead, as ``featgraph train --task link`` does, which brings a third more vertices to
sample (about 3,500 seeds a batch against 2,650). Frameworks:

- ``featgraph``: featgraph's ``LinkNeighborLoader`` and layers, pairs scored by featgraph's SDDMM
  (``training.linkpred.LinkPredictor``); layer ``i`` of ``L`` runs over the first ``L - i`` hops' edges
  only (the rows later layers read, as DGL's blocks);
- ``featgraph-blocks``: featgraph's ``LinkBlockLoader`` (DGL's edge-prediction layout: per-source uniform
  negatives, one block per layer, each layer's destinations expanded again) and featgraph's layers;
- ``featgraph-pyg``: the same loader, batches and model code with PyG's layers, pairs scored by
  ``(h[src] * h[dst]).sum(-1)``;
- ``featgraph-floor``: ``featgraph-blocks`` with each layer's aggregation replaced by its destinations' own
  rows: every dense product, ReLU, the decoder, loss and Adam step, and the sampling, without sparse work; where
  it trains fewer than twice DGL's edges per second, no aggregation speed reaches 2x DGL on this machine;
- ``dgl``: DGL's ``as_edge_prediction_sampler`` over its ``NeighborSampler`` with a uniform negative sampler
  (one destination per positive's source), DGL's ``SAGEConv`` on the sampled blocks (each layer computes only
  the rows the next reads) and ``dgl.ops.u_dot_v``, where DGL imports.

Per row: positive edges per second sampling alone and training (sample + forward + backward + Adam step), over
``--batches`` batches after ``--warmup``, each row's ratio to featgraph's, the wait share (the part of the
training loop's wall time spent obtaining the next batch, ``minibatch.throughput``) and peak memory above the
raw edges and features; each row in its own process (``run_rows``). ``--device cuda`` samples on the CPU and
trains on the GPU as ``featgraph bench minibatch --device cuda`` does: featgraph's loaders pin their batches,
every framework's batch is copied to the GPU before its step (``minibatch.moved``), and peak memory is the
GPU's.
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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import torch
import torch.nn.functional as F

from ..datasets import products_like
from ..graph import Graph
from ..graph.interop import import_dgl
from ..loader import LinkBlockLoader
from ..native import toolchain
from ..training import Preset
from ..training.linkpred import NEGATIVES, LinkPredictor, batch_step, link_loader, split_edges
from ..training.minibatch import fanout_list
from .measure import peak_extra_mb
from .minibatch import CLOCKS, BenchModel, DGLSampledNet, endless, failures, throughput, unavailable
from .report import Table, add_common_arguments, device_name, machine, run_worker, write_json

BATCH_SIZE = 1024
TARGET = 2.0  # the training speed-up over DGL the floor is checked against
DEFAULT_FANOUTS = (15, 10, 5)
HIDDEN = 256
FRAMEWORKS = {
    "featgraph": "featgraph loader + featgraph layers",
    "featgraph-blocks": "featgraph edge-prediction blocks + featgraph layers",
    "featgraph-floor": "the same, aggregations removed (dense floor)",
    "featgraph-pyg": "featgraph loader + PyG layers",
    "dgl": "DGL edge-prediction sampler + DGL layers",
}


@dataclass
class Row:
    framework: str
    sample_edges_s: float | None = None  # positive edges per second, sampling alone
    train_edges_s: float | None = None  # sample + forward + backward + optimizer step
    sample_vs_featgraph: float | None = None  # over featgraph's in the same run
    train_vs_featgraph: float | None = None
    wait_share: float | None = None  # of the training loop's wall time, obtaining the next batch on the device
    peak_mb: float | None = None
    note: str = ""


LinkBatch = tuple[torch.Tensor, Any, Any, torch.Tensor]  # input rows, graph input, pairs input, labels
Forward = Callable[[torch.Tensor, Any, Any], torch.Tensor]  # (rows, graph input, pairs input) -> a logit per pair


def _positives(batch: LinkBatch) -> int:
    """A batch's positive edges: half its labelled pairs (one negative per positive)."""
    return batch[3].numel() // 2


def _featgraph(
    raw: dict, fanouts: list[int], negatives: str, net: LinkPredictor, pin: bool
) -> tuple[Callable[[bool], Iterator], Forward]:
    graph = Graph(raw["src"], raw["dst"], raw["num_nodes"])

    def batches(background: bool) -> Iterator[LinkBatch]:
        prefetch = 2 if background else 0
        loader = link_loader(graph, raw["x"], raw["train"], fanouts, BATCH_SIZE, 0, prefetch, negatives)
        loader.pin_memory = pin  # the flag the loader reads per batch; link_loader leaves it off
        return (batch_step(b) for b in endless(loader))

    return batches, net


def _featgraph_blocks(
    raw: dict, fanouts: list[int], net: LinkPredictor, pin: bool
) -> tuple[Callable[[bool], Iterator], Forward]:
    graph = Graph(raw["src"], raw["dst"], raw["num_nodes"])
    train_eids = torch.arange(raw["train"].shape[1])  # the message graph's first edges are the positives

    def batches(background: bool) -> Iterator[LinkBatch]:
        loader = LinkBlockLoader(graph, fanouts, BATCH_SIZE, edge_ids=train_eids, negatives=1, seed=0,
                                 prefetch=2 if background else 0, pin_memory=pin, x=raw["x"])  # fmt: skip
        for batch in endless(loader):
            pairs = torch.cat([torch.stack(g.coo()) for g in (batch.pair_graph, batch.neg_pair_graph)], dim=1)
            labels = torch.cat([torch.ones(batch.batch_size), torch.zeros(batch.neg_pair_graph.num_edges)])
            yield batch.x, batch.blocks, pairs, labels

    return batches, net


def _dgl(raw: dict, fanouts: list[int], dgl: Any, net: torch.nn.Module) -> tuple[Callable[[bool], Iterator], Forward]:
    graph = dgl.graph((raw["src"], raw["dst"]), num_nodes=raw["num_nodes"])
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler(list(reversed(fanouts))),
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(1),
    )
    train_eids = torch.arange(raw["train"].shape[1])  # the message graph's first edges are the positives
    loader = dgl.dataloading.DataLoader(graph, train_eids, sampler, batch_size=BATCH_SIZE, shuffle=True)
    x = raw["x"]

    def batches(background: bool) -> Iterator[LinkBatch]:
        for input_nodes, positive, negative, blocks in endless(loader):
            labels = torch.cat([torch.ones(positive.num_edges()), torch.zeros(negative.num_edges())])
            yield x[input_nodes], blocks, (positive, negative), labels

    def forward(h: torch.Tensor, blocks: list, pair_graphs: tuple) -> torch.Tensor:
        h = net(blocks, h)
        return torch.cat([dgl.ops.u_dot_v(g, h, h).squeeze(-1) for g in pair_graphs])

    return batches, forward


def run_one(
    data_path: str, framework: str, fanouts: list[int], negatives: str, batches: int, warmup: int, clock: str,
    device: str = "cpu",
) -> Row:  # fmt: skip
    """One row, meant for a fresh process; ``negatives``: featgraph's loader's draws (``link_loader``);
    ``device``: where the model trains (the batches are sampled on the CPU and copied there)."""
    row = Row(framework, note=unavailable(framework))
    if row.note:
        return row
    raw = torch.load(data_path, weights_only=True)
    in_channels = raw["x"].shape[1]
    dgl = import_dgl() if framework == "dgl" else None
    torch.manual_seed(0)
    if dgl is not None:
        config = Preset(hidden=HIDDEN, dropout=0.0, lr=0.003, weight_decay=0.0)
        net: torch.nn.Module = DGLSampledNet(dgl, BenchModel("sage", tuple(fanouts), config), in_channels, HIDDEN)
    else:
        net = LinkPredictor(in_channels, HIDDEN, len(fanouts), "pyg" if framework == "featgraph-pyg" else "featgraph")
    where = torch.device(device)
    net.to(where)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.003)
    pin = where.type == "cuda"

    def measure() -> None:
        if dgl is not None:
            stream, forward = _dgl(raw, fanouts, dgl, net)
        elif framework in ("featgraph-blocks", "featgraph-floor"):
            stream, forward = _featgraph_blocks(raw, fanouts, net, pin)
        else:
            stream, forward = _featgraph(raw, fanouts, negatives, net, pin)

        def step(batch: LinkBatch) -> None:
            x, graph_input, pairs_input, labels = batch
            optimizer.zero_grad()
            F.binary_cross_entropy_with_logits(forward(x, graph_input, pairs_input), labels).backward()
            optimizer.step()

        net.train()
        sampling = stream(True)
        row.sample_edges_s = throughput(sampling, batches, warmup, lambda batch: None, clock, where, _positives).per_s
        sampling.close()
        training = stream(True)
        rate = throughput(training, batches, warmup, step, clock, where, _positives)
        row.train_edges_s, row.wait_share = rate.per_s, rate.wait_share
        training.close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DGL's CPU-affinity advice, PyG's deprecations
        try:
            with (
                mock.patch("featgraph.nn.sage.gspmm", _destination_rows)
                if framework == "featgraph-floor"
                else (contextlib.nullcontext())
            ):
                row.peak_mb = peak_extra_mb(measure, where)
        except failures(dgl) as err:
            return Row(framework, note=f"failed: {str(err)[:80]}")
    return row


def _destination_rows(g: Graph, op: str, reduce: str, lhs: torch.Tensor, rhs: Any) -> torch.Tensor:
    """The dense floor's stand-in for SAGEConv's aggregation: the destinations' own rows (a block's first
    sources), so every product keeps its shape and no sparse work is left."""
    return lhs[: g.num_dst_nodes]


def floor_verdict(rows: list[Row], target: float) -> str | None:
    """Whether ``target`` times DGL's training edges/s is within reach of the dense floor's rate, or None
    without both rows."""
    by_name = {r.framework: r for r in rows if r.train_edges_s}
    if "dgl" not in by_name or "featgraph-floor" not in by_name:
        return None
    needed, floor = target * by_name["dgl"].train_edges_s, by_name["featgraph-floor"].train_edges_s
    reach = "within reach" if floor >= needed else "out of reach"
    return f"{target:g}x DGL's training needs {needed:,.0f} edges/s; the dense floor trains {floor:,.0f}: {reach}"


def run_rows(
    data_path: str, frameworks: list[str], fanouts: list[int], negatives: str, batches: int, warmup: int,
    threads: int, clock: str, device: str = "cpu",
) -> list[Row]:  # fmt: skip
    """Each framework in its own process, on ``threads`` threads, training on ``device``; ratios to featgraph's
    row. OpenMP's threads wait passively unless ``OMP_WAIT_POLICY`` says otherwise: with other jobs on the
    machine, DGL's spinning threads cut its row to about a tenth (8,000 sampled edges/s against 65,000 passive,
    2 cores)."""
    env = {"OMP_WAIT_POLICY": "passive", **os.environ, "OMP_NUM_THREADS": str(threads)}
    rows = []
    for framework in frameworks:
        row = run_worker(
            "featgraph.bench.linkpred", [data_path, framework, fanouts, negatives, batches, warmup, clock, device], env
        )
        rows.append(Row(framework, note=row) if isinstance(row, str) else Row(**row))
    ours = next((r for r in rows if r.framework == "featgraph" and r.train_edges_s), None)
    for r in rows:
        if ours is not None and r.train_edges_s:
            r.sample_vs_featgraph = r.sample_edges_s / ours.sample_edges_s
            r.train_vs_featgraph = r.train_edges_s / ours.train_edges_s
    return rows


TABLE = Table({
    "framework": lambda r: FRAMEWORKS[r.framework], "sampling edges/s": "sample_edges_s:,.0f",
    "training edges/s": "train_edges_s:,.0f", "sampling / featgraph": "sample_vs_featgraph:.2f",
    "training / featgraph": "train_vs_featgraph:.2f", "wait share": "wait_share:.0%", "peak MB": "peak_mb:,.0f",
    "note": "note",
})  # fmt: skip


def write_task(scale: float, directory: Path) -> tuple[Path, str]:
    """products-like at ``scale``, its edges split for link prediction, saved for the workers: (file, a line
    describing it). The message graph's first edges are the training positives (``split_edges``' order)."""
    dataset = products_like(scale, seed=0)
    task = split_edges(dataset.name, dataset.features, dataset.graph)
    src, dst = task.graph.coo()
    path = directory / "task.pt"
    torch.save({"src": src, "dst": dst, "num_nodes": task.graph.num_nodes, "x": task.x, "train": task.train}, path)
    described = (
        f"{dataset.name}: {task.graph.num_nodes:,} vertices, {task.graph.num_edges:,} message-passing edges, "
        f"{task.train.shape[1]:,} training positives, {task.x.shape[1]} features"
    )
    return path, described


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=list(FRAMEWORKS))
    parser.add_argument(
        "--fanout",
        type=fanout_list,
        default=list(DEFAULT_FANOUTS),
        help="neighbours per hop (default 15,10,5); -1 takes all",
    )
    parser.add_argument(
        "--negatives",
        choices=NEGATIVES,
        default="triplet",
        help="featgraph's loader's negative per positive: triplet (the default), the positive's source with a random "
        "destination, as DGL's uniform sampler draws; binary, a random pair (a third more vertices to sample)",
    )
    parser.add_argument("--batches", type=int, default=10, help="timed batches per measurement")
    parser.add_argument("--warmup", type=int, default=2, help="untimed batches before them")
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall", help="wall clock or each worker's CPU time")
    parser.add_argument(
        "--device", default="cpu", help="where the layers train: cpu (default) or cuda; the sampling stays on the CPU"
    )
    add_common_arguments(
        parser, threads=toolchain.num_threads(), scale=0.01, scale_help="products-like's scale, in (0, 1]"
    )


def run(args: argparse.Namespace) -> list[Row]:
    threads = toolchain.checked_threads(args.threads, "--threads")
    device = device_name(args.device)
    print(
        f"machine: {machine()}; device: {device}; {threads} threads per worker; {args.clock} clock; "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    with tempfile.TemporaryDirectory(prefix="featgraph-linkpred-") as directory:
        path, described = write_task(args.scale, Path(directory))
        print(
            f"graph {described}; GraphSAGE {len(args.fanout)}x{HIDDEN}, fan-out {','.join(map(str, args.fanout))}, "
            f"batches of {BATCH_SIZE} positives + {BATCH_SIZE} {args.negatives} negatives, {args.batches} timed after "
            f"{args.warmup}",
            flush=True,
        )
        print(TABLE.header, flush=True)
        rows = run_rows(
            str(path), args.frameworks, args.fanout, args.negatives, args.batches, args.warmup, threads, args.clock,
            args.device,
        )  # fmt: skip
        print(TABLE.rows(rows), flush=True)
    verdict = floor_verdict(rows, TARGET)
    if verdict:
        print(verdict)
    write_json(
        args.json, [asdict(r) for r in rows], device=device, scale=args.scale, threads=threads, fanout=args.fanout,
        negatives=args.negatives, verdict=verdict,
    )  # fmt: skip
    return rows


if __name__ == "__main__":  # the worker: one row as JSON on the last line of stdout
    print(json.dumps(asdict(run_one(*json.loads(sys.argv[1])))))
