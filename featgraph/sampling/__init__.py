"""Mini-batch sampling on large graphs: ``NeighborSampler`` draws GraphSAGE-style neighbourhoods of seed
vertices into bipartite blocks (compiled C++/OpenMP), ``MiniBatch.to_edge_index`` gives PyG's flat form,
``NegativeSampling`` draws the negative examples of link prediction."""

from .negative import NegativeSampling
from .neighbor import Block, EdgeIndexBatch, MiniBatch, NeighborSampler

__all__ = ["Block", "EdgeIndexBatch", "MiniBatch", "NegativeSampling", "NeighborSampler"]
