"""Training across processes and machines on torch.distributed: partition a graph (``partition``), store one
part per rank (``save_parts``, ``load_part``), exchange halo rows between ranks inside autograd, and train
full-graph models with ``DistributedDataParallel``, or sampled mini-batches with local or fetched feature rows
(``MiniBatchTrainer``). See docs/guides/distributed.md."""

from .feature_store import FeatureStore, ReplicatedFeatures
from .halo import HaloPlan, exchange
from .minibatch import MiniBatchTrainer
from .partition import METHODS, edge_cut, partition
from .store import Part, load_part, read_meta, save_parts
from .trainer import EpochRecord, PartClassifier, Trainer

__all__ = [
    "METHODS",
    "EpochRecord",
    "FeatureStore",
    "HaloPlan",
    "MiniBatchTrainer",
    "Part",
    "PartClassifier",
    "ReplicatedFeatures",
    "Trainer",
    "edge_cut",
    "exchange",
    "load_part",
    "partition",
    "read_meta",
    "save_parts",
]
