"""Mini-batch sampling on large graphs: ``NeighborSampler`` draws GraphSAGE-style neighbourhoods of seed
vertices into bipartite blocks (compiled C++/OpenMP), ``MiniBatch.to_edge_index`` gives PyG's flat form,
``HeteroNeighborSampler`` samples typed graphs with a fan-out per edge type, ``TemporalSampler`` samples each
seed's past (PyG's ``time_attr``), ``NegativeSampling`` draws the negative examples of link prediction."""

from .hetero import HeteroMiniBatch, HeteroNeighborSampler
from .negative import NegativeSampling
from .neighbor import Block, EdgeIndexBatch, MiniBatch, NeighborSampler
from .temporal import TemporalSampler

__all__ = [
    "Block", "EdgeIndexBatch", "HeteroMiniBatch", "HeteroNeighborSampler", "MiniBatch", "NegativeSampling",
    "NeighborSampler", "TemporalSampler",
]  # fmt: skip
