"""``featgraph bench hetero-sampling``: typed neighbour sampling on a graph of ogbn-mag's shape
(``datasets.mag_like``, every edge type also reversed as PyG's ``ToUndirected`` makes it), seeds of type
paper, the same fan-outs for every edge type: featgraph's ``HeteroNeighborSampler`` and its PyG-layout loader
(``NeighborLoader`` on the ``HeteroData``: the sample, then features and labels gathered into the batch)
against DGL's ``NeighborSampler.sample_blocks`` on a DGL heterograph, where DGL imports. PyG's own typed
sampler needs pyg-lib, which does not install on this torch. Rows are timed in turns, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict

import torch

from ..datasets import mag_like
from ..graph import HeteroGraph
from ..graph.interop import import_dgl
from ..loader import NeighborLoader
from ..native import toolchain
from ..sampling import HeteroNeighborSampler
from ..timing import interleaved_best_ms
from .report import add_common_arguments, machine, write_json
from .sampling import TABLE, Row


def with_reverse_edges(edges: dict) -> dict:
    """Every edge type and its reverse, ``(dst, "rev_" + rel, src)``, as PyG's ``ToUndirected`` adds them."""
    out = dict(edges)
    for (src_type, rel, dst_type), index in edges.items():
        out[(dst_type, f"rev_{rel}", src_type)] = index.flip(0)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=0.1, help="mag-like's scale (1.0: ogbn-mag's 1.9M nodes)")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[10, 10])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=8)
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
        ]
    }
    loader = _pyg_loader(dataset, edges, args.fanouts, seeds)
    if loader is not None:
        positions = torch.arange(seeds.numel()).view(args.batches, args.batch)
        samplers["featgraph NeighborLoader on HeteroData (PyG's batch)"] = lambda: [loader(p) for p in positions]
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
    times = interleaved_best_ms(samplers, repeat=args.repeat)
    base = times[next(iter(samplers))]
    rows = [
        Row(name, ms / args.batches, args.batch / (ms / args.batches) * 1e3, ms / base) for name, ms in times.items()
    ]
    print(TABLE(rows))
    write_json(args.json, [asdict(r) for r in rows], graph=dataset.name, fanouts=args.fanouts)
    return rows


def _pyg_loader(dataset, edges: dict, fanouts: list[int], seeds: torch.Tensor):
    """featgraph's loader over the dataset as PyG's ``HeteroData``, or None without PyG."""
    try:
        data = dataset.to_pyg()
    except ImportError:
        return None
    for edge_type, index in edges.items():
        data[edge_type].edge_index = index
    return NeighborLoader(data, fanouts, input_nodes=("paper", seeds), prefetch=0)


def _dgl_sampler(graph, fanouts: list[int]) -> Callable[[torch.Tensor], object] | None:
    """DGL's typed block sampling, or None where DGL does not import."""
    dgl = import_dgl()
    if dgl is None:
        return None
    relations = {et: tuple(graph.relation(et).coo()) for et in graph.edge_types}
    dgl_graph = dgl.heterograph(relations, num_nodes_dict=graph.num_nodes_dict)
    dgl_graph.create_formats_()
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    return lambda seeds: sampler.sample_blocks(dgl_graph, {"paper": seeds})
