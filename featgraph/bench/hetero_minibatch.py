"""``featgraph bench hetero-minibatch``: typed mini-batches on a graph of ogbn-mag's shape
(``datasets.mag_like``, every edge type also reversed as PyG's ``ToUndirected`` makes it), seeds of type
paper, the same fan-outs for every edge type.

- Sampling: featgraph's ``HeteroNeighborSampler`` (PyG's flat batch, each vertex expanded once, and DGL's
  typed blocks, each block's sources expanded again) and its PyG-layout loader (``NeighborLoader`` on the
  ``HeteroData``: the sample, then features and labels gathered into the batch) against DGL's
  ``NeighborSampler.sample_blocks`` on a DGL heterograph, where DGL imports; the loader also with its batches
  made in two worker processes (``worker_processes=2``; the pool starts in the warm-up). PyG's own typed
  sampler needs pyg-lib, which does not install on this torch.
- Training steps (with PyG): PyG's ``to_hetero`` GraphSAGE (two ``SAGEConv`` layers, 64 hidden, sum over
  edge types; papers have 128 features, the other types fixed random 128-wide ones) on the loader's
  batches, forward + loss + backward + Adam step, with PyG's layers and with the same model after
  ``featgraph.nn.accelerate`` (featgraph's ``SAGEConv`` per edge type), from the same weights.

Rows are timed in turns, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from dataclasses import asdict

import torch

from ..datasets import mag_like
from ..graph import HeteroGraph
from ..graph.hetero import with_reverse_edges
from ..graph.interop import import_dgl
from ..loader import NeighborLoader
from ..native import toolchain
from ..sampling import HeteroNeighborSampler
from ..timing import interleaved_best_ms
from .report import Table, add_common_arguments, machine, write_json
from .sampling import TABLE, Row, timed_rows

HIDDEN = 64
WORKERS = 2  # the worker processes' row
TRAIN_TABLE = Table({
    "layers": "layers", "ms / step": "ms:.1f", "time / featgraph's": lambda r: f"{r['ratio']:.2f}x",
})  # fmt: skip


def hetero_sage(metadata: tuple, num_classes: int) -> torch.nn.Module:
    """PyG's ``to_hetero`` of a two-layer GraphSAGE (lazy input sizes), summing over edge types."""
    from torch_geometric.nn import SAGEConv, to_hetero

    class SAGE(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.conv2 = SAGEConv((-1, -1), HIDDEN), SAGEConv((-1, -1), num_classes)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    return to_hetero(SAGE(), metadata, aggr="sum")


def training_rows(loader: NeighborLoader, data, batches: int, repeat: int) -> list[dict]:
    """ms per training step of PyG's ``to_hetero`` GraphSAGE with PyG's layers and after ``accelerate``, on the
    same ``batches`` pre-sampled batches, from the same weights."""
    from ..nn import accelerate

    sampled = [loader(torch.arange(i * loader.batch_size, (i + 1) * loader.batch_size)) for i in range(batches)]
    gen = torch.Generator().manual_seed(0)
    width = data["paper"].x.shape[1]
    features = {t: torch.randn(data[t].num_nodes, width, generator=gen) for t in data.node_types if t != "paper"}
    torch.manual_seed(0)
    pyg = hetero_sage(data.metadata(), int(data["paper"].y.max()) + 1)
    pyg(*inputs(sampled[0], features))  # the lazy sizes
    ours = copy.deepcopy(pyg)
    accelerate(ours)

    def steps(model: torch.nn.Module) -> Callable[[], None]:
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

        def run() -> None:
            for batch in sampled:
                size = batch["paper"].batch_size
                out = model(*inputs(batch, features))["paper"][:size]
                loss = torch.nn.functional.cross_entropy(out, batch["paper"].y[:size])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        return run

    times = interleaved_best_ms({"featgraph (accelerate)": steps(ours), "PyG": steps(pyg)}, repeat=repeat)
    base = times["featgraph (accelerate)"]
    return [{"layers": name, "ms": ms / batches, "ratio": ms / base} for name, ms in times.items()]


def inputs(batch, features: dict) -> tuple[dict, dict]:
    """(x_dict, edge_index_dict) of a typed batch: paper features, the other types' rows of ``features``."""
    x = {t: features[t][batch[t].n_id] for t in features}
    x["paper"] = batch["paper"].x
    return x, batch.edge_index_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=0.1, help="mag-like's scale (1.0: ogbn-mag's 1.9M nodes)")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[10, 10])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument(
        "--train-batches", type=int, default=4, help="batches per timed run of training steps (0: no training rows)"
    )
    add_common_arguments(parser, repeat=3)


def run(args: argparse.Namespace) -> list[Row]:
    dataset = mag_like(args.scale)
    typed = dataset.graph
    edges = with_reverse_edges(typed.to_edge_index_dict())
    graph = HeteroGraph(edges, typed.num_nodes_dict)
    papers = graph.num_nodes_dict["paper"]
    seeds = torch.randperm(papers, generator=torch.Generator().manual_seed(0))[: args.batches * args.batch]
    batches = seeds.view(args.batches, args.batch)
    threads = toolchain.num_threads()
    ours = HeteroNeighborSampler(graph, args.fanouts)
    samplers: dict[str, Callable[[], object]] = {
        f"featgraph HeteroNeighborSampler ({threads} threads)": lambda: [
            ours.sample("paper", b, seed=i) for i, b in enumerate(batches)
        ],
        "featgraph HeteroNeighborSampler.sample_blocks (DGL's blocks)": lambda: [
            ours.sample_blocks({"paper": b}, seed=i) for i, b in enumerate(batches)
        ],
    }
    data = _pyg_data(dataset, edges)
    loader = None
    if data is not None:
        loader = NeighborLoader(data, args.fanouts, input_nodes=("paper", seeds), batch_size=args.batch, prefetch=0)
        positions = torch.arange(seeds.numel()).view(args.batches, args.batch)
        samplers["featgraph NeighborLoader on HeteroData (PyG's batch)"] = lambda: [loader(p) for p in positions]
        workers = NeighborLoader(data, args.fanouts, input_nodes=("paper", seeds), batch_size=args.batch,
                                 worker_processes=WORKERS)  # fmt: skip
        samplers[f"the same, {WORKERS} worker processes"] = lambda: list(workers)
    dgl = _dgl_sampler(graph, args.fanouts)
    if dgl is not None:
        samplers["DGL NeighborSampler.sample_blocks"] = lambda: [dgl(b) for b in batches]
    print(f"machine: {machine()}")
    print(f"graph: {dataset.name} with reverse edges, {typed.num_nodes_dict}, {graph.num_edges:,} edges")
    one = ours.sample("paper", batches[0], seed=0)
    reached = ", ".join(f"{t} {n.numel()}" for t, n in one.n_id.items())
    print(f"fanouts {args.fanouts} per edge type, batch {args.batch} papers; one batch reaches {reached}")
    if dgl is None:
        print("DGL does not import here (pip install 'featgraph[bench]'): its row is left out")
    rows = timed_rows(samplers, args.batches, args.batch, args.repeat)
    print(TABLE(rows))
    train = []
    if loader is not None and args.train_batches:
        train = training_rows(loader, data, args.train_batches, args.repeat)
    if train:
        print(f"training steps, to_hetero GraphSAGE ({HIDDEN} hidden), {args.train_batches} batches:")
        print(TRAIN_TABLE(train))
    write_json(args.json, [asdict(r) for r in rows], graph=dataset.name, fanouts=args.fanouts, training=train)
    return rows


def _pyg_data(dataset, edges: dict):
    """The dataset as PyG's ``HeteroData`` with ``edges`` (the reverse edge types too), or None without PyG."""
    try:
        data = dataset.to_pyg()
    except ImportError:
        return None
    for edge_type, index in edges.items():
        data[edge_type].edge_index = index
    return data


def _dgl_sampler(graph, fanouts: list[int]) -> Callable[[torch.Tensor], object] | None:
    """DGL's typed block sampling, or None where DGL does not import."""
    dgl = import_dgl()
    if dgl is None:
        return None
    relations = {et: tuple(graph.relation(et).coo()) for et in graph.edge_types}
    dgl_graph = dgl.heterograph(relations, num_nodes_dict=graph.num_nodes_dict)
    dgl_graph.create_formats_()
    sampler = dgl.dataloading.NeighborSampler(fanouts[::-1])  # DGL lists the input layer's fan-out first
    return lambda seeds: sampler.sample_blocks(dgl_graph, {"paper": seeds})
