"""Two-layer node-classification models with the published hyper-parameters, written once against a layer
namespace so the same definition builds featgraph's model (``featgraph.nn``) or PyG's (``torch_geometric.nn``):
parameter names agree, so one's state dict loads into the other."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from types import ModuleType

import torch
import torch.nn.functional as F

from ..ops import dropout

BACKENDS = {"featgraph": "featgraph.nn", "pyg": "torch_geometric.nn"}


@dataclass(frozen=True)
class Preset:
    """Hyper-parameters: the papers' for GCN (Kipf and Welling), GAT (Velickovic et al.) and AGNN
    (Thekumparampil et al.); PyG's examples' for GraphSAGE and GIN on the citation graphs."""

    hidden: int
    dropout: float
    lr: float
    weight_decay: float
    epochs: int = 200
    heads: int = 1
    aggr: str = "mean"


PRESETS = {
    "gcn": Preset(hidden=16, dropout=0.5, lr=0.01, weight_decay=5e-4),
    "sage": Preset(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4),
    "gat": Preset(hidden=8, heads=8, dropout=0.6, lr=0.005, weight_decay=5e-4),
    "agnn": Preset(hidden=16, dropout=0.5, lr=0.01, weight_decay=5e-4),
    "gin": Preset(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4),
}
MODELS = tuple(PRESETS)


def layers(backend: str) -> ModuleType:
    """The layer namespace of ``backend`` ("featgraph" or "pyg"); a clear error where PyG is missing."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {tuple(BACKENDS)}, got {backend!r}")
    try:
        return importlib.import_module(BACKENDS[backend])
    except ImportError as err:
        raise ImportError(f"backend {backend!r} needs {BACKENDS[backend]}: pip install torch_geometric") from err


def preset(model: str, **overrides: object) -> Preset:
    """The model's preset with the given fields replaced (None values are ignored)."""
    if model not in PRESETS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    return replace(PRESETS[model], **{k: v for k, v in overrides.items() if v is not None})


class NodeClassifier(torch.nn.Module):
    """``model`` ("gcn", "sage", "gat", "agnn", "gin") as two message-passing layers with dropout, built
    from ``backend``'s layers."""

    def __init__(self, model: str, in_channels: int, num_classes: int, config: Preset, backend: str) -> None:
        super().__init__()
        nn = layers(backend)
        self.model, self.dropout = model, config.dropout
        hidden = config.hidden
        self.activation = F.elu if model == "gat" else F.relu
        # featgraph's hashed-mask dropout; PyG models keep torch's (which dominates small-graph epochs on CPU)
        self.drop = dropout if backend == "featgraph" else F.dropout
        if model == "gcn":
            self.conv1, self.conv2 = nn.GCNConv(in_channels, hidden), nn.GCNConv(hidden, num_classes)
        elif model == "sage":  # "pool" is GraphSAGE's pooling aggregator: PyG's projected max
            kwargs = {"aggr": "max", "project": True} if config.aggr == "pool" else {"aggr": config.aggr}
            self.conv1 = nn.SAGEConv(in_channels, hidden, **kwargs)
            self.conv2 = nn.SAGEConv(hidden, num_classes, **kwargs)
        elif model == "gat":
            heads, p = config.heads, config.dropout
            self.conv1 = nn.GATConv(in_channels, hidden, heads=heads, dropout=p)
            self.conv2 = nn.GATConv(hidden * heads, num_classes, heads=1, concat=False, dropout=p)
        elif model == "agnn":
            self.lin1 = torch.nn.Linear(in_channels, hidden)
            self.conv1, self.conv2 = nn.AGNNConv(requires_grad=False), nn.AGNNConv(requires_grad=True)
            self.lin2 = torch.nn.Linear(hidden, num_classes)
        elif model == "gin":
            Linear = torch.nn.Linear
            mlp = torch.nn.Sequential(Linear(in_channels, hidden), torch.nn.ReLU(), Linear(hidden, hidden))
            self.conv1, self.conv2 = nn.GINConv(mlp, train_eps=True), nn.GINConv(Linear(hidden, num_classes))
        else:
            raise ValueError(f"model must be one of {MODELS}, got {model!r}")

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = self.drop(x, self.dropout, self.training)
        if self.model == "agnn":
            x = self.drop(F.relu(self.lin1(x)), self.dropout, self.training)
            x = self.conv2(self.conv1(x, edge_index), edge_index)
            return self.lin2(self.drop(x, self.dropout, self.training))
        x = self.drop(self.activation(self.conv1(x, edge_index)), self.dropout, self.training)
        return self.conv2(x, edge_index)
