"""Mini-batch training on large graphs with the loaders users know: ``NeighborLoader`` and
``LinkNeighborLoader`` (PyG's interfaces and batch layouts; a ``HeteroData`` gets ``HeteroNeighborLoader`` and
``HeteroLinkNeighborLoader``), ``BlockLoader`` and ``HeteroBlockLoader`` (DGL's per-layer blocks, on one vertex
set and on a typed graph), ``LinkBlockLoader`` (DGL's edge-prediction batches; a typed graph gets
``HeteroLinkBlockLoader``) and ``layerwise_inference`` (full-graph evaluation of a trained model, one layer at a
time). They sample with ``featgraph.sampling`` and prepare the next batches in a background thread."""

from .block_loader import BlockBatch, BlockLoader
from .hetero_block_loader import HeteroBlockBatch, HeteroBlockLoader
from .hetero_loader import HeteroNeighborLoader
from .inference import layerwise_inference
from .link_block_loader import HeteroLinkBlockBatch, HeteroLinkBlockLoader, LinkBlockBatch, LinkBlockLoader
from .link_neighbor_loader import HeteroLinkNeighborLoader, LinkNeighborLoader
from .neighbor_loader import Batch, NeighborLoader

__all__ = [
    "Batch", "BlockBatch", "BlockLoader", "HeteroBlockBatch", "HeteroBlockLoader", "HeteroLinkBlockBatch",
    "HeteroLinkBlockLoader", "HeteroLinkNeighborLoader",
    "HeteroNeighborLoader", "LinkBlockBatch", "LinkBlockLoader", "LinkNeighborLoader", "NeighborLoader",
    "layerwise_inference",
]  # fmt: skip
