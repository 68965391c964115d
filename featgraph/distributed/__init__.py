"""Training across processes and machines on torch.distributed: partition a graph (``partition``), store one
part per rank (``save_parts``, ``load_part``), exchange halo rows between ranks inside autograd, and train
full-graph models with ``DistributedDataParallel``. See docs/guides/distributed.md."""

from .halo import HaloPlan, exchange
from .partition import METHODS, edge_cut, partition
from .store import Part, load_part, read_meta, save_parts

__all__ = ["METHODS", "HaloPlan", "Part", "edge_cut", "exchange", "load_part", "partition", "read_meta", "save_parts"]
