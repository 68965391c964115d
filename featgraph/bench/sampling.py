"""``featgraph bench sampling``: neighbour sampling throughput, featgraph's compiled sampler against a vectorised
torch sampler and DGL.

The graph is R-MAT (power-law in-degrees, ``2**scale`` vertices, 16 edges each: 4.2M edges at scale 18).
Every implementation samples the same seed batches into DGL-style blocks (hop 0 from the seeds, each block's
sources the frontier first, then new vertices in order of first appearance) and builds each block's
``featgraph.Graph``; DGL builds its own blocks (``sample_neighbors`` + ``to_block`` per hop), where it imports
(the bench extra). Rows are timed in turns, best of ``--repeat``; seeds/s = batch size / time per batch."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from .. import datasets
from ..graph import Graph
from ..graph.interop import import_dgl
from ..native import toolchain
from ..sampling import Block, NeighborSampler
from ..timing import interleaved_best_ms
from .report import Table, add_common_arguments, machine, write_json


@dataclass
class Row:
    sampler: str
    ms_per_batch: float
    seeds_per_s: float
    time_over_featgraph: float  # this sampler's time / the first row's (featgraph on every thread)


TABLE = Table({
    "sampler": "sampler", "ms / batch": "ms_per_batch:.2f", "seeds / s": "seeds_per_s:,.0f",
    "time / featgraph's": lambda r: f"{r.time_over_featgraph:.2f}x",
})  # fmt: skip


class TorchSampler:
    """Uniform sampling without replacement in vectorised torch (no loop over vertices). Rows of at most
    their fan-out are kept whole; rows of at most twice their fan-out are shuffled (a random key per edge,
    sorted within the row) and cut; longer rows draw their fan-out with replacement and redraw repeats until
    their offsets are distinct (a redraw is uniform, so the set is a uniform k-subset by symmetry; at most
    half the row taken, a few rounds). The relabelling marks the frontier in a dense map and orders the
    other sources by their first position."""

    def __init__(self, graph: Graph, fanouts: list[int]) -> None:
        self.indptr, self.indices, self.edge_ids = graph.csr()
        self.fanouts = fanouts
        self.local = torch.full((graph.num_nodes,), -1, dtype=torch.int64)

    @staticmethod
    def offsets(degree: torch.Tensor, kept: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(row, offset in the row) of every kept edge, row after row."""
        row = torch.repeat_interleave(torch.arange(kept.numel()), kept)
        offset = torch.arange(row.numel()) - (torch.cumsum(kept, 0) - kept)[row]  # rank in the row: whole rows
        shuffled = (kept < degree) & (degree <= 2 * kept)
        rows = shuffled.nonzero().squeeze(1)
        row_degree = degree[rows]
        edge_row = torch.repeat_interleave(rows, row_degree)
        edge_offset = torch.arange(edge_row.numel()) - (torch.cumsum(row_degree, 0) - row_degree).repeat_interleave(
            row_degree
        )
        order = torch.argsort(edge_row + torch.rand(edge_row.numel(), generator=gen, dtype=torch.float64))
        # the sort keeps rows grouped, so position i of the shuffle is rank edge_offset[i] of its row
        offset[shuffled[row]] = edge_offset[order[edge_offset < kept[edge_row]]]
        drawn = (degree > 2 * kept)[row].nonzero().squeeze(1)
        todo, width = drawn, int(degree.max()) + 1 if degree.numel() else 1
        while todo.numel():
            draw = torch.rand(todo.numel(), generator=gen, dtype=torch.float64) * degree[row[todo]]
            offset[todo] = torch.minimum(draw.long(), degree[row[todo]] - 1)
            key, order = torch.sort(row[drawn] * width + offset[drawn], stable=True)
            repeat = torch.zeros(drawn.numel(), dtype=torch.bool)
            repeat[order[1:]] = key[1:] == key[:-1]
            todo = drawn[repeat]
        return row, offset

    def hop(self, frontier: torch.Tensor, fanout: int, gen: torch.Generator) -> Block:
        start = self.indptr[frontier]
        degree = self.indptr[frontier + 1] - start
        kept = degree if fanout == -1 else degree.clamp(max=fanout)
        row, offset = self.offsets(degree, kept, gen)
        picked = start[row] + offset
        sources, e_id = self.indices[picked], self.edge_ids[picked]
        num_frontier = frontier.numel()
        self.local[frontier] = torch.arange(num_frontier)
        outside = sources[self.local[sources] < 0]
        unique, inverse = torch.unique(outside, return_inverse=True)
        first = torch.full((unique.numel(),), outside.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(outside.numel()), "amin")
        new = unique[torch.argsort(first)]
        self.local[new] = torch.arange(num_frontier, num_frontier + new.numel())
        block_sources = self.local[sources]
        n_id = torch.cat([frontier, new])
        self.local[n_id] = -1
        indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(kept, 0)])
        return Block(Graph.from_csr(indptr, block_sources, n_id.numel()), n_id, e_id)

    def sample(self, seeds: torch.Tensor, seed: int) -> list[Block]:
        gen = torch.Generator().manual_seed(seed)
        blocks, frontier = [], seeds
        for fanout in self.fanouts:
            blocks.append(self.hop(frontier, fanout, gen))
            frontier = blocks[-1].n_id
        return blocks[::-1]


def dgl_sampler(graph: Graph, fanouts: list[int]) -> Callable[[torch.Tensor], list] | None:
    """DGL's block sampling (``dgl.dataloading.NeighborSampler``'s loop), or None where DGL does not import."""
    dgl = import_dgl()
    if dgl is None:
        return None
    dgl_graph = dgl.graph(graph.coo(), num_nodes=graph.num_nodes)
    dgl_graph.create_formats_()

    def sample(seeds: torch.Tensor) -> list:
        blocks = []
        for fanout in fanouts:
            block = dgl.to_block(dgl.sampling.sample_neighbors(dgl_graph, seeds, fanout), seeds)
            seeds = block.srcdata[dgl.NID]
            blocks.insert(0, block)
        return blocks

    return sample


def timed_rows(samplers: dict[str, Callable[[], object]], batches: int, batch: int, repeat: int) -> list[Row]:
    """One row per sampler (each call samples ``batches`` batches of ``batch`` seeds), timed in turns, best of
    ``repeat``, against the first sampler's time."""
    times = interleaved_best_ms(samplers, repeat=repeat)
    base = times[next(iter(samplers))]
    return [Row(name, ms / batches, batch / (ms / batches) * 1e3, ms / base) for name, ms in times.items()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=int, default=18, help="R-MAT scale: 2**scale vertices")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=8)
    add_common_arguments(parser, repeat=3)


def run(args: argparse.Namespace) -> list[Row]:
    graph = datasets.rmat(args.scale, 16)
    degree = graph.in_degrees()
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))
    batches = seeds[: args.batches * args.batch].view(args.batches, args.batch)
    threads = toolchain.num_threads()  # what the sampler runs on ($OMP_NUM_THREADS, else torch's count)
    ours = NeighborSampler(graph, args.fanouts)
    reference = TorchSampler(graph, args.fanouts)
    dgl = dgl_sampler(graph, args.fanouts)
    plural = "s" if threads > 1 else ""
    samplers: dict[str, Callable[[], object]] = {
        f"featgraph ({threads} thread{plural})": lambda: [ours.sample(b, seed=i) for i, b in enumerate(batches)]
    }
    if threads > 1:
        ours_one = NeighborSampler(graph, args.fanouts, num_threads=1)
        samplers["featgraph (1 thread)"] = lambda: [ours_one.sample(b, seed=i) for i, b in enumerate(batches)]
    samplers[f"torch, vectorised ({torch.get_num_threads()} torch threads)"] = lambda: [
        reference.sample(b, i) for i, b in enumerate(batches)
    ]
    if dgl is not None:
        samplers["DGL sample_neighbors + to_block"] = lambda: [dgl(b) for b in batches]

    print(f"machine: {machine()}")
    print(
        f"graph: R-MAT scale {args.scale}, {graph.num_nodes} vertices, {graph.num_edges} edges, in-degree "
        f"max {int(degree.max())}, mean {graph.num_edges / graph.num_nodes:.1f}"
    )
    batch = ours.sample(batches[0], seed=0)
    sizes = ", ".join(
        f"{b.graph.num_dst_nodes} -> {b.graph.num_src_nodes} ({b.graph.num_edges} edges)" for b in batch.blocks
    )
    print(f"fanouts {args.fanouts}, batch {args.batch}; one batch's blocks (input layer first): {sizes}")
    if dgl is None:
        print("DGL does not import here (pip install 'featgraph[bench]'): its row is left out")
    rows = timed_rows(samplers, args.batches, args.batch, args.repeat)
    print(TABLE(rows))
    write_json(args.json, [asdict(r) for r in rows], graph=f"R-MAT scale {args.scale}", fanouts=args.fanouts)
    return rows
