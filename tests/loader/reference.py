"""Independent references for the loader tests: what a PyG-layout batch must be, checked with plain torch
from the full graph's edge list, and full-graph PyG models to compare mini-batch computation with."""

from __future__ import annotations

import torch

from featgraph import Graph


def check_flat_batch(graph: Graph, batch, seeds: torch.Tensor, fanouts: list[int], replace: bool = False) -> None:
    """``batch`` (PyG's layout) is a sample of ``graph`` around ``seeds``: the seeds first, every edge a
    graph edge through ``n_id`` and ``e_id``, each vertex's in-edges drawn at the hop that first reached it
    (min(fanout, in-degree) of them, none for the last hop's vertices), the per-hop counts PyG reports."""
    n_id, e_id, edge_index = batch.n_id, batch.e_id, batch.edge_index
    batch_size = seeds.numel()
    assert torch.equal(n_id[:batch_size], seeds)
    if "batch_size" in batch:  # node batches say how many seeds lead; link batches' count is num_sampled_nodes[0]
        assert batch.batch_size == batch_size
    assert torch.unique(n_id).numel() == n_id.numel()
    src, dst = graph.coo()
    assert torch.equal(n_id[edge_index[0]], src[e_id]) and torch.equal(n_id[edge_index[1]], dst[e_id])
    if not replace:
        assert torch.unique(e_id).numel() == e_id.numel()
    assert sum(batch.num_sampled_nodes) == n_id.numel() and len(batch.num_sampled_nodes) == len(fanouts) + 1
    assert sum(batch.num_sampled_edges) == e_id.numel() and len(batch.num_sampled_edges) == len(fanouts)
    in_degree = graph.in_degrees()[n_id]
    kept = torch.bincount(edge_index[1], minlength=n_id.numel())
    hop_ends = torch.tensor(batch.num_sampled_nodes).cumsum(0).tolist()
    start, edge_start = 0, 0
    for hop, fanout in enumerate(fanouts):
        end = hop_ends[hop]
        degree = in_degree[start:end]
        expected = (
            degree if fanout == -1 else (torch.where(degree > 0, fanout, 0) if replace else degree.clamp(max=fanout))
        )
        assert torch.equal(kept[start:end], expected)
        edge_end = edge_start + batch.num_sampled_edges[hop]
        assert bool(((edge_index[1, edge_start:edge_end] >= start) & (edge_index[1, edge_start:edge_end] < end)).all())
        start, edge_start = end, edge_end
    assert int(kept[start:].sum()) == 0  # the last hop's vertices are read, not expanded


def sage_forward(convs, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """A PyG SAGE model's full-graph forward: relu between layers."""
    for depth, conv in enumerate(convs):
        x = conv(x, edge_index)
        if depth < len(convs) - 1:
            x = x.relu()
    return x
