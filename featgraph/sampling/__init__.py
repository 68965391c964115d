"""Mini-batch sampling on large graphs: ``NeighborSampler`` draws GraphSAGE-style neighbourhoods of seed
vertices into bipartite blocks (compiled C++/OpenMP), ``MiniBatch.to_edge_index`` gives PyG's flat form,
``HeteroNeighborSampler`` samples typed graphs with a fan-out per edge type (PyG's flat batch or DGL's typed
blocks), ``DisjointSampler`` a subgraph per seed (PyG's ``disjoint``), under each seed's time where there are
times (PyG's ``time_attr``), ``NegativeSampling`` draws the negative examples of link prediction (PyG's),
``GlobalUniformNegatives`` DGL's global ones; ``PairGraph`` and ``HeteroPairGraph`` carry DGL's interface on an
edge-prediction batch's pair graphs."""

from .dgl_view import HeteroPairGraph, PairGraph
from .disjoint import DisjointSampler
from .hetero import HeteroBlock, HeteroBlocks, HeteroMiniBatch, HeteroNeighborSampler
from .negative import GlobalUniformNegatives, NegativeSampling
from .neighbor import Block, EdgeIndexBatch, MiniBatch, NeighborSampler

__all__ = [
    "Block", "EdgeIndexBatch", "GlobalUniformNegatives", "HeteroBlock", "HeteroBlocks", "HeteroMiniBatch",
    "HeteroNeighborSampler", "HeteroPairGraph", "MiniBatch", "NegativeSampling", "NeighborSampler", "PairGraph",
    "DisjointSampler",
]  # fmt: skip
