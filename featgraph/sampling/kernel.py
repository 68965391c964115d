"""The neighbour sampler's compiled code: one C++/OpenMP source (``native/cpp/sampler.cpp``), compiled
once through the disk kernel cache, with four operations behind its ``run`` entry point.

- ``PREPARE`` (once per sampler, weighted only): per vertex the number of in-edges of positive weight, and
  with replacement the running sum of the weights along each CSR row.
- ``COUNT`` (per hop): how many in-edges each frontier vertex keeps (``min(k, deg)``, ``k`` with
  replacement, every edge for ``k = -1``), prefix-summed into the block's ``indptr``, so the sample writes
  into arrays of the right size.
- ``SAMPLE`` (per hop): each frontier vertex draws its in-edges into its block row, in parallel; then the
  block's sources are relabelled: the frontier keeps ids ``0..F-1`` and every other source gets the next id
  in order of its first appearance among the block's edges. The first appearance of a vertex is the
  smallest edge position claiming it (an atomic max on a dense global -> local map that the caller keeps and
  that every call leaves as it found it, all -1), and ids follow a prefix count of first appearances, so
  the relabelling is parallel and the same for any thread count.
- ``LOCATE`` (per batch, with exclusions only): the CSR positions of given edges, so COUNT and SAMPLE can
  leave them out (DGL's ``exclude_edges``: a row with excluded edges draws among its others).

A block's other format (its CSC, grouped by source) is built where it is first asked for, by the graph's
compiled counting sort (``graph.formats.compress``), as DGL builds a block's formats on first use: a layer
whose source rows need no gradient (the input layer's features) never asks for it.

Randomness: vertex ``v`` at hop ``h`` draws from its own splitmix64 stream seeded by ``(seed, h, v)`` (the
finaliser ``fg_keep`` hashes with), so a batch depends on the seed alone, not on which thread sampled which
vertex.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch

from ..graph.formats import Compressed, index_dtype_for
from ..native import compile_source, launch
from ..native.sources import cpp_source

PREPARE, COUNT, SAMPLE, LOCATE = 0, 1, 2, 3
UNCLAIMED = -1  # the global -> local map's entry for a vertex outside the current block

SOURCE = cpp_source("sampler.cpp")
BYTES_PER_EDGE = 24  # a hop's arrays per drawn edge: source, edge id, and the bound on its node ids


def physical_memory() -> int:
    """This machine's memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class WeightTables(NamedTuple):
    """Per-edge sampling weights laid out for the compiled sampler (all in CSR order)."""

    weight: torch.Tensor  # float64
    positive_degree: torch.Tensor  # per vertex: in-edges of positive weight, the only ones ever drawn
    cumulative: torch.Tensor | None  # running sums along each row, for draws with replacement


class Hop(NamedTuple):
    """One hop's block: ``indptr`` over the frontier, ``edge_index`` (2, E): each edge's source relabelled
    (frontier first) and its destination (its frontier position), the user ``edge_ids`` of the block's edges,
    the global ``node_ids`` of its sources, and ``narrow_csr``, the block's CSR in int32 as the kernels read it
    (written beside the int64 one in the same passes), or None where the block's ids may not fit int32."""

    indptr: torch.Tensor
    edge_index: torch.Tensor
    edge_ids: torch.Tensor
    node_ids: torch.Tensor
    narrow_csr: Compressed | None

    @property
    def sources(self) -> torch.Tensor:
        return self.edge_index[0]


def _run() -> object:
    return compile_source(SOURCE)


def weight_tables(indptr: torch.Tensor, csr_weight: torch.Tensor, replace: bool, threads: int) -> WeightTables:
    """``csr_weight`` (float64, CSR order, finite, non-negative) with its per-vertex positive counts and, for
    draws with replacement, its running sums per row."""
    num_nodes = indptr.numel() - 1
    positive = torch.empty(num_nodes, dtype=torch.int64)
    cumulative = torch.empty_like(csr_weight) if replace else None
    launch(_run(), [indptr, csr_weight, positive, cumulative], [PREPARE, num_nodes, threads])
    return WeightTables(csr_weight, positive, cumulative)


def sample_hop(
    csr: Compressed,
    frontier: torch.Tensor,
    fanout: int,
    replace: bool,
    weights: WeightTables | None,
    local: torch.Tensor,
    seed: int,
    hop: int,
    threads: int,
    excluded: torch.Tensor | None = None,
) -> Hop:
    """Draw up to ``fanout`` in-edges (-1: all) of every ``frontier`` vertex (distinct int64 ids) from the
    graph's int64 ``csr`` and relabel the block. ``local`` is the sampler's global -> local map, all
    ``UNCLAIMED``; it is left so. ``excluded``: sorted distinct CSR positions (``csr_positions``) no draw
    takes: a row with some draws among its other edges, as if they were not in the graph."""
    indptr, num_edges = _counted(csr, frontier, fanout, replace, weights, hop, threads, excluded)
    edge_index = torch.empty(2, num_edges, dtype=torch.int64)  # the kernel writes both rows in place
    edge_ids = torch.empty(num_edges, dtype=torch.int64)
    node_ids = torch.empty(frontier.numel() + num_edges, dtype=torch.int64)
    num_nodes = torch.empty(1, dtype=torch.int64)
    narrow = None  # the block has at most F + E sources
    if index_dtype_for(frontier.numel() + num_edges, num_edges) == torch.int32:
        narrow = Compressed(*(torch.empty(n, dtype=torch.int32) for n in (frontier.numel() + 1, num_edges, num_edges)))
    outputs = [edge_index[0], edge_ids, node_ids, num_nodes, edge_index[1], *(narrow or (None,) * 3)]
    scalars = [threads, seed, hop, 0, 0, 0]
    _sample(csr, frontier, indptr, fanout, replace, weights, local, outputs, scalars, excluded)
    # a copy of the used prefix: a view would keep (and torch.save would write) the whole upper bound
    return Hop(indptr, edge_index, edge_ids, node_ids[: int(num_nodes)].clone(), narrow)


class TypedHop(NamedTuple):
    """One relation's draws in a typed batch: ``edge_index`` (2, E): each drawn edge's source (its type's batch
    id) and destination (its type's batch id), grouped by destination in the frontier's order (``indptr``
    over the frontier), the edges' user ids, and the source-type vertices they brought into the batch."""

    edge_index: torch.Tensor
    edge_ids: torch.Tensor
    new_nodes: torch.Tensor
    indptr: torch.Tensor


def sample_typed_hop(
    csr: Compressed,
    frontier: torch.Tensor,
    fanout: int,
    replace: bool,
    weights: WeightTables | None,
    local: torch.Tensor,
    base: int,
    first_destination: int,
    seed: int,
    stream: int,
    threads: int,
    excluded: torch.Tensor | None = None,
) -> TypedHop:
    """``sample_hop`` for one relation of a typed batch: ``csr`` rows are the destination type's vertices,
    its indices the source type's; ``local`` is the source type's map for the whole batch (batch ids of its
    vertices already in, else ``UNCLAIMED``), which the new sources join with ids from ``base`` on and stay in
    (the caller resets it after the batch); the frontier's batch ids run from ``first_destination``.
    ``stream`` picks the random streams (one per hop and relation); ``excluded`` as ``sample_hop``'s."""
    indptr, num_edges = _counted(csr, frontier, fanout, replace, weights, stream, threads, excluded)
    edge_index = torch.empty(2, num_edges, dtype=torch.int64)  # the kernel writes both rows in place
    edge_ids, new = torch.empty(num_edges, dtype=torch.int64), torch.empty(num_edges, dtype=torch.int64)
    count = torch.empty(1, dtype=torch.int64)
    outputs = [edge_index[0], edge_ids, new, count, edge_index[1], None, None, None]
    scalars = [threads, seed, stream, 1, base, first_destination]
    _sample(csr, frontier, indptr, fanout, replace, weights, local, outputs, scalars, excluded)
    return TypedHop(edge_index, edge_ids, new[: int(count)].clone(), indptr)


def _counted(
    csr: Compressed, frontier: torch.Tensor, fanout: int, replace: bool, weights: WeightTables | None, hop: int,
    threads: int, excluded: torch.Tensor | None,
) -> tuple[torch.Tensor, int]:  # fmt: skip
    """The block's ``indptr`` over the frontier (how many in-edges each vertex keeps) and its edge count,
    refused where the hop would not fit."""
    num_frontier = frontier.numel()
    if replace and num_frontier * fanout >= 2**62:  # the compiled prefix sum of the counts would wrap
        raise MemoryError(
            f"fanouts: hop {hop} would draw {fanout} in-edges with replacement for each of {num_frontier} "
            "vertices, past 2**62 edges; lower the hop's fan-out or the batch size"
        )
    positive, weight = (None, None) if weights is None else (weights.positive_degree, weights.weight)
    indptr = torch.empty(num_frontier + 1, dtype=torch.int64)
    scalars = [COUNT, num_frontier, fanout, int(replace), threads, _count(excluded)]
    launch(_run(), [csr.indptr, frontier, positive, indptr, weight, excluded], scalars)
    num_edges = int(indptr[-1])
    if num_edges * BYTES_PER_EDGE > physical_memory():  # torch's allocator error would name nothing of ours
        raise MemoryError(
            f"fanouts: hop {hop} draws {fanout} in-edges for each of {num_frontier} vertices, {num_edges:,} edges "
            "in all, more than this machine's memory holds; lower the hop's fan-out or the batch size"
        )
    return indptr, num_edges


def _sample(
    csr: Compressed, frontier: torch.Tensor, indptr: torch.Tensor, fanout: int, replace: bool,
    weights: WeightTables | None, local: torch.Tensor, outputs: list, scalars: list[int],
    excluded: torch.Tensor | None,
) -> None:  # fmt: skip
    """The compiled SAMPLE: ``outputs`` (sources, edge ids, node ids, their count, destinations, then the int32
    CSR's indptr, sources and edge ids or three Nones) and ``scalars`` (threads, seed, stream, typed, base,
    first destination) as the C++ reads them."""
    positive = None if weights is None else weights.positive_degree
    weight, cumulative = (None, None) if weights is None else (weights.weight, weights.cumulative)
    pointers = [csr.indptr, csr.indices, csr.edge_ids, weight, positive, cumulative, frontier, indptr, local]
    scalars = [SAMPLE, frontier.numel(), fanout, int(replace), *scalars, _count(excluded)]
    launch(_run(), [*pointers, *outputs, excluded], scalars)


def _count(excluded: torch.Tensor | None) -> int:
    return 0 if excluded is None else excluded.numel()


def csr_positions(csr: Compressed, edge_ids: torch.Tensor, destinations: torch.Tensor, threads: int) -> torch.Tensor:
    """The sorted distinct CSR positions of the graph's edges ``edge_ids`` (user ids, int64, in range), whose
    destinations are ``destinations``: each found along its destination's row."""
    positions = torch.empty_like(edge_ids)
    launch(_run(), [csr.indptr, csr.edge_ids, edge_ids, destinations, positions], [LOCATE, edge_ids.numel(), threads])
    return torch.unique(positions)
