"""Mini-batch training on large graphs with the loaders users know: ``NeighborLoader`` (PyG's interface and
batch layout; a ``HeteroData`` gets ``HeteroNeighborLoader``), ``BlockLoader`` (DGL's per-layer blocks) and
``layerwise_inference`` (full-graph evaluation of a trained model, one layer at a time). They sample with
``featgraph.sampling`` and prepare the next batches in a background thread."""

from .block_loader import BlockBatch, BlockLoader
from .hetero_loader import HeteroNeighborLoader
from .inference import layerwise_inference
from .neighbor_loader import Batch, NeighborLoader

__all__ = ["Batch", "BlockBatch", "BlockLoader", "HeteroNeighborLoader", "NeighborLoader", "layerwise_inference"]
