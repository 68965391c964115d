"""Independent references for the sampler tests: what a block must be, checked with plain numpy/torch from
the full graph's edge list, and the fan graphs the distribution tests draw from."""

from __future__ import annotations

import numpy as np
import torch

from featgraph import Graph
from featgraph.sampling import Block, MiniBatch


def fan_graph(num_dst: int, degree: int) -> Graph:
    """Destinations ``0..num_dst-1`` each with in-edges from the same ``degree`` sources ``num_dst + p``, in
    order ``p``: every destination's row is one draw from the same population."""
    dst = torch.arange(num_dst).repeat_interleave(degree)
    src = num_dst + torch.arange(degree).repeat(num_dst)
    return Graph(src, dst, num_dst + degree)


def drawn_positions(block: Block, num_dst: int, fanout: int) -> np.ndarray:
    """The (num_dst, fanout) row positions a fan graph's block drew, per destination in draw order."""
    indptr, indices, _ = block.graph.csr()
    assert torch.equal(indptr, torch.arange(num_dst + 1) * fanout)
    return (block.n_id[indices] - num_dst).numpy().reshape(num_dst, fanout)


def expected_counts(available: torch.Tensor, fanout: int, replace: bool) -> torch.Tensor:
    """Edges a vertex keeps out of ``available`` drawable in-edges."""
    if fanout == -1:
        return available
    if replace:
        return torch.where(available > 0, fanout, 0)
    return available.clamp(max=fanout)


def first_appearance(frontier: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Sources outside the frontier, each once, in order of first appearance."""
    outside = sources[~np.isin(sources, frontier)]
    _, first = np.unique(outside, return_index=True)
    return outside[np.sort(first)]


def check_block(
    graph: Graph, block: Block, frontier: torch.Tensor, fanout: int, replace: bool, available: torch.Tensor
) -> None:
    """``block`` is hop ``frontier``'s block of ``graph``: its edges are graph edges (through ``e_id`` and
    ``n_id``), each destination keeps the expected count, the sources are the frontier then the new vertices
    in order of first appearance, and its CSR is its edge list grouped by destination."""
    num_dst = frontier.numel()
    n_id, e_id = block.n_id, block.e_id
    assert block.graph.num_dst_nodes == num_dst and block.graph.num_src_nodes == n_id.numel()
    assert torch.equal(n_id[:num_dst], frontier)
    src_local, dst_local = block.graph.coo()
    graph_src, graph_dst = graph.coo()
    assert torch.equal(n_id[src_local], graph_src[e_id]) and torch.equal(n_id[dst_local], graph_dst[e_id])
    counts = torch.bincount(dst_local, minlength=num_dst)
    assert torch.equal(counts, expected_counts(available[frontier], fanout, replace))
    if not replace or fanout == -1:
        assert torch.unique(e_id).numel() == e_id.numel()
    expected_new = first_appearance(frontier.numpy(), graph_src[e_id].numpy())
    np.testing.assert_array_equal(n_id[num_dst:].numpy(), expected_new)
    indptr, indices, edge_ids = block.graph.csr()
    assert torch.equal(indptr, torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]))
    assert torch.equal(dst_local, torch.repeat_interleave(torch.arange(num_dst), counts))  # CSR order
    assert torch.equal(indices, src_local) and torch.equal(edge_ids, torch.arange(e_id.numel()))
    if graph.edge_weight is not None:
        assert torch.equal(block.graph.edge_weight, graph.edge_weight[e_id])


def check_minibatch(
    graph: Graph,
    batch: MiniBatch,
    seeds: torch.Tensor,
    fanouts: list[int],
    replace: bool = False,
    available: torch.Tensor | None = None,
) -> None:
    """Every hop's block checked, hop 0 from ``seeds``, each next frontier the last block's sources, blocks
    ordered input layer first; ``available`` drawable in-edges per vertex (default: the in-degree)."""
    available = graph.in_degrees() if available is None else available
    assert len(batch.blocks) == len(fanouts)
    assert torch.equal(batch.seeds, seeds) and batch.batch_size == seeds.numel()
    frontier = seeds
    for hop, fanout in enumerate(fanouts):
        block = batch.blocks[-1 - hop]
        check_block(graph, block, frontier, fanout, replace, available)
        frontier = block.n_id
    assert torch.equal(batch.input_nodes, frontier)


def assert_same_batch(a: MiniBatch, b: MiniBatch) -> None:
    assert torch.equal(a.seeds, b.seeds) and len(a.blocks) == len(b.blocks)
    for x, y in zip(a.blocks, b.blocks, strict=True):
        assert torch.equal(x.n_id, y.n_id) and torch.equal(x.e_id, y.e_id)
        assert all(torch.equal(p, q) for p, q in zip(x.graph.coo(), y.graph.coo(), strict=True))
