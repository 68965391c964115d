"""Seeded synthetic graphs for kernel and speed work. Same arguments, same graph, on every machine.

Edges are returned in a shuffled order so that the user order differs from CSR order, as with real data.
"""

from __future__ import annotations

import torch

from ..graph import Graph


def _shuffled(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, gen: torch.Generator) -> Graph:
    perm = torch.randperm(src.numel(), generator=gen)
    return Graph(src[perm], dst[perm], num_nodes)


def uniform(num_nodes: int, avg_degree: float, seed: int = 0) -> Graph:
    """Erdos-Renyi-like multigraph: ``num_nodes * avg_degree`` edges with uniform random endpoints."""
    gen = torch.Generator().manual_seed(seed)
    num_edges = int(round(num_nodes * avg_degree))
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    return Graph(src, dst, num_nodes)


def reddit_sized(scale: float = 1.0, seed: int = 0) -> Graph:
    """A uniform graph of Reddit's size (232,965 vertices, average degree 492: 115M edges at scale 1), the
    graph GPU GNN papers train on; ``scale`` multiplies the vertex count."""
    return uniform(max(2, int(232_965 * scale)), 492, seed=seed)


def community(
    num_nodes: int, avg_degree: float, community_size: int = 128, within: float = 0.9, seed: int = 0
) -> Graph:
    """A stochastic block model with communities of ``community_size`` vertices: each edge's source lies in
    its destination's community with probability ``within``, else anywhere. Vertex ids are shuffled, so the
    communities are there to find (``Graph.reordered``) but not in the id order, as in relabelled real data."""
    if not 0.0 <= within <= 1.0:
        raise ValueError(f"within must be a probability in [0, 1], got {within}")
    if community_size < 1:
        raise ValueError(f"community_size must be at least 1, got {community_size}")
    gen = torch.Generator().manual_seed(seed)
    num_edges = int(round(num_nodes * avg_degree))
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    start = dst - dst % community_size  # communities are id ranges before the shuffle
    span = (num_nodes - start).clamp(max=community_size)
    inside = start + (torch.rand(num_edges, generator=gen) * span).long()
    anywhere = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    src = torch.where(torch.rand(num_edges, generator=gen) < within, inside, anywhere)
    relabel = torch.randperm(num_nodes, generator=gen)
    return _shuffled(relabel[src], relabel[dst], num_nodes, gen)


def rand100k(vertex_scale: float = 1.0, degree_scale: float = 1.0, seed: int = 0) -> Graph:
    """FeatGraph's skewed rand-100K shape: 20% of the vertices have in-degree 2000, the rest 100.

    At scale 1 it has 100k vertices and 48M edges; ``vertex_scale`` multiplies the vertex count and
    ``degree_scale`` both degrees (e.g. 0.5 and 0.1 give 50k vertices and 2.4M edges).
    """
    gen = torch.Generator().manual_seed(seed)
    num_nodes = max(1, int(round(100_000 * vertex_scale)))
    high, low = max(1, int(round(2000 * degree_scale))), max(1, int(round(100 * degree_scale)))
    hubs = torch.randperm(num_nodes, generator=gen)[: num_nodes // 5]
    degree = torch.full((num_nodes,), low, dtype=torch.int64)
    degree[hubs] = high
    dst = torch.repeat_interleave(torch.arange(num_nodes), degree)
    src = torch.randint(0, num_nodes, (dst.numel(),), generator=gen)
    return _shuffled(src, dst, num_nodes, gen)


def rmat(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19, c: float = 0.19, seed: int = 0) -> Graph:
    """R-MAT power-law graph (Chakrabarti et al. 2004): ``2**scale`` vertices, ``edge_factor`` edges each.

    Each edge picks one quadrant of the adjacency per bit with probabilities a, b, c, 1-a-b-c
    (Graph500's defaults), which yields a skewed, power-law-like degree distribution.
    """
    if not 0 < a + b + c < 1:
        raise ValueError("rmat probabilities must satisfy 0 < a + b + c < 1")
    gen = torch.Generator().manual_seed(seed)
    num_nodes = 1 << scale
    num_edges = num_nodes * edge_factor
    src = torch.zeros(num_edges, dtype=torch.int64)
    dst = torch.zeros(num_edges, dtype=torch.int64)
    for bit in range(scale):
        r = torch.rand(num_edges, generator=gen)
        src_bit = (r >= a + b).to(torch.int64)  # quadrants c and d: lower half
        dst_bit = ((r >= a) & (r < a + b) | (r >= a + b + c)).to(torch.int64)  # quadrants b and d: right half
        src |= src_bit << bit
        dst |= dst_bit << bit
    # scramble vertex ids so the hubs are not all at id 0
    relabel = torch.randperm(num_nodes, generator=gen)
    return _shuffled(relabel[src], relabel[dst], num_nodes, gen)
