"""Vertex orders that put neighbours next to each other: a window of 16 destination rows then draws its
sources from few distinct columns, so tensor-core tiles (``tc_translation``) fill up and gathered rows share
cache lines. TC-GNN's wins, and FlashSparse's, are on graphs whose ids follow their communities; a graph
whose ids are random (as most generated and many relabelled real graphs are) gets such ids from an order.

``rcm``: reverse Cuthill-McKee (scipy) on the symmetrised adjacency, a breadth-first order from a
low-degree vertex that keeps every edge's endpoints close; O(E log E), no other dependency.
``community``: communities found by label propagation (each vertex, half of them a round, takes the label most
of its neighbours hold, ties broken at random) laid out one after another, each in its vertices' RCM order,
and the communities in the order RCM first reaches them. On a stochastic block model of 128-vertex
communities it fills tensor-core tiles about 1.7x as well as RCM alone (``featgraph bench tc-fill``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import reverse_cuthill_mckee

METHODS = ("rcm", "community")
PROPAGATION_ROUNDS = 10


def locality_order(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, method: str = "rcm") -> torch.Tensor:
    """``order[new_id] = old_id``: the vertices in ``method``'s order (int64, on the edges' device)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    rcm = _rcm(src, dst, num_nodes)
    if method == "rcm":
        return rcm
    label = propagated_labels(src, dst, num_nodes)
    rank = inverse_order(rcm)
    first = torch.full_like(label, num_nodes).scatter_reduce(0, label, rank, "amin")  # where RCM meets each
    return torch.argsort(first[label] * num_nodes + rank)


def _rcm(src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    rows, cols = src.cpu().numpy(), dst.cpu().numpy()
    ones = np.ones(rows.size, dtype=np.int8)
    adjacency = sp.coo_matrix((ones, (rows, cols)), shape=(num_nodes, num_nodes)).tocsr()
    symmetric = (adjacency + adjacency.T).tocsr()  # a direction-free order: in- and out-neighbours alike
    symmetric.sort_indices()
    order = reverse_cuthill_mckee(symmetric, symmetric_mode=True)
    return torch.from_numpy(order.astype(np.int64)).to(src.device)


def propagated_labels(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, seed: int = 0) -> torch.Tensor:
    """A community label per vertex by label propagation over in- and out-neighbours, seeded; vertices with
    no neighbours keep their own label."""
    gen = torch.Generator(device=src.device).manual_seed(seed)
    sources, targets = torch.cat([src, dst]), torch.cat([dst, src])
    label = torch.arange(num_nodes, device=src.device)
    for _ in range(PROPAGATION_ROUNDS):
        pairs, counts = torch.unique(targets * num_nodes + label[sources], return_counts=True)
        vertex, candidate = pairs // num_nodes, pairs % num_nodes
        score = counts + 0.5 * torch.rand(counts.numel(), generator=gen, device=src.device)
        best = torch.full((num_nodes,), -1.0, device=src.device).scatter_reduce(0, vertex, score, "amax")
        won = score == best[vertex]
        proposed = label.clone()
        proposed[vertex[won]] = candidate[won]
        moving = torch.rand(num_nodes, generator=gen, device=src.device) < 0.5  # synchronous rounds oscillate
        label = torch.where(moving, proposed, label)
    return label


def inverse_order(order: torch.Tensor) -> torch.Tensor:
    """``position[old_id] = new_id`` for ``order[new_id] = old_id``."""
    position = torch.empty_like(order)
    position[order] = torch.arange(order.numel(), device=order.device)
    return position
