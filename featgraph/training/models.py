"""Two-layer node-classification models with the published hyper-parameters, written once against a layer
namespace so the same definition builds featgraph's model (``featgraph.nn``) or PyG's (``torch_geometric.nn``):
parameter names agree, so one's state dict loads into the other."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType

import torch
import torch.nn.functional as F

from ..ops import dropout

BACKENDS = {"featgraph": "featgraph.nn", "pyg": "torch_geometric.nn"}
DROPOUTS = ("featgraph", "torch")
DEFAULT_DROPOUT = {"featgraph": "featgraph", "pyg": "torch"}  # each backend's own


@dataclass(frozen=True)
class Preset:
    """Hyper-parameters: the papers' for GCN (Kipf and Welling), GAT (Velickovic et al.) and AGNN
    (Thekumparampil et al.); PyG's examples' for GraphSAGE and GIN on the citation graphs; R-GCN's
    (Schlichtkrull et al.) 16 hidden and weight decay, with the dropout and rate that train the generated
    entity datasets (``entity_like``: 331 labelled training nodes, 90 relations on the AIFB shape)."""

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
    "rgcn": Preset(hidden=16, dropout=0.5, lr=0.05, weight_decay=5e-4),
    "rgat": Preset(hidden=16, heads=2, dropout=0.5, lr=0.05, weight_decay=5e-4),
    "hgt": Preset(hidden=16, heads=2, dropout=0.5, lr=0.01, weight_decay=5e-4),
}
MODELS = tuple(PRESETS)
RELATIONAL_MODELS = ("rgcn", "rgat", "hgt")  # read an edge type per edge: typed datasets only
# RGAT's attention weights sum to one per relation, so alone it cannot count a relation's in-edges, which the
# entity datasets' labels are planted in: its "f-additive" mod adds the unweighted sum back (Busbridge et al.'s
# cardinality preservation; aifb-like test accuracy 0.82 against 0.56-0.77 without, 100 epochs)
RGAT_OPTIONS = {"mod": "f-additive", "attention_mechanism": "within-relation", "concat": False}
TYPED_NODE = "entity"  # HGT's one node type on a relational graph
HOMOGENEOUS_MODELS = tuple(m for m in MODELS if m not in RELATIONAL_MODELS)
CONV_MODELS = ("gcn", "sage", "gat", "gin")  # one message-passing layer each, stackable (AGNN is not)


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


def activation(model: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The non-linearity between layers: ELU for GAT (as its paper), ReLU for the others."""
    return F.elu if model == "gat" else F.relu


def dropout_function(kind: str) -> Callable[[torch.Tensor, float, bool], torch.Tensor]:
    """featgraph's hashed-mask dropout ("featgraph") or torch's ("torch", which dominates small-graph epochs
    on the CPU)."""
    if kind not in DROPOUTS:
        raise ValueError(f"dropout must be one of {DROPOUTS}, got {kind!r}")
    return dropout if kind == "featgraph" else F.dropout


def activate_and_drop(
    h: torch.Tensor, activate: Callable[[torch.Tensor], torch.Tensor], drop: Callable, p: float, training: bool
) -> torch.Tensor:
    """``drop(activate(h), p, training)``. featgraph's dropout takes ReLU into its own pass: one read and
    one write of ``h`` forward and backward instead of two (and under torch.compile, Inductor stores no ReLU
    mask, which its CPU code writes slowly)."""
    if drop is dropout and activate is F.relu:
        return dropout(h, p, training, relu=True)
    return drop(activate(h), p, training)


def conv_layer(
    nn: ModuleType, model: str, in_channels: int, out_channels: int, config: Preset, last: bool
) -> tuple[torch.nn.Module, int]:
    """One message-passing layer of ``model`` ("gcn", "sage", "gat", "gin") from the layer namespace ``nn``, and
    the width of its output: a hidden layer, or the output layer when ``last`` (GAT's averages one head, GIN's
    applies one Linear)."""
    if model == "gcn":
        return nn.GCNConv(in_channels, out_channels), out_channels
    if model == "sage":  # "pool" is GraphSAGE's pooling aggregator: PyG's projected max
        kwargs = {"aggr": "max", "project": True} if config.aggr == "pool" else {"aggr": config.aggr}
        return nn.SAGEConv(in_channels, out_channels, **kwargs), out_channels
    if model == "gat":
        if last:
            return nn.GATConv(in_channels, out_channels, heads=1, concat=False, dropout=config.dropout), out_channels
        conv = nn.GATConv(in_channels, out_channels, heads=config.heads, dropout=config.dropout)
        return conv, out_channels * config.heads
    if model == "gin":
        Linear, width = torch.nn.Linear, out_channels
        if last:
            return nn.GINConv(Linear(in_channels, width)), width
        mlp = torch.nn.Sequential(Linear(in_channels, width), torch.nn.ReLU(), Linear(width, width))
        return nn.GINConv(mlp, train_eps=True), width
    raise ValueError(f"model must be one of {CONV_MODELS}, got {model!r}")


class NodeClassifier(torch.nn.Module):
    """``model`` ("gcn", "sage", "gat", "agnn", "gin", "rgcn", "rgat", "hgt") as two message-passing layers with
    dropout, built from ``backend``'s layers, with ``dropout``'s dropout ("featgraph" or "torch"; by default the
    backend's own: featgraph's for featgraph's layers, torch's for PyG's). The relational models take
    ``num_relations`` and read each edge's type (``forward``'s ``edge_type``): "rgcn" the mean over each
    relation's in-edges, "rgat" attention within each relation (``RGAT_OPTIONS``), "hgt" two ``HGTConv`` layers
    between an input and an output ``Linear``, over one node type and an edge type per relation."""

    def __init__(
        self,
        model: str,
        in_channels: int,
        num_classes: int,
        config: Preset,
        backend: str,
        dropout: str | None = None,
        num_relations: int = 0,
    ) -> None:
        super().__init__()
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {model!r}")
        nn = layers(backend)
        self.model, self.dropout = model, config.dropout
        self.activation = activation(model)
        self.drop = dropout_function(dropout or DEFAULT_DROPOUT[backend])
        if model == "agnn":
            self.lin1 = torch.nn.Linear(in_channels, config.hidden)
            self.conv1, self.conv2 = nn.AGNNConv(requires_grad=False), nn.AGNNConv(requires_grad=True)
            self.lin2 = torch.nn.Linear(config.hidden, num_classes)
        elif model == "rgcn":
            self.conv1 = nn.RGCNConv(in_channels, config.hidden, num_relations, aggr="mean")
            self.conv2 = nn.RGCNConv(config.hidden, num_classes, num_relations, aggr="mean")
        elif model == "rgat":
            heads = config.heads
            self.conv1 = nn.RGATConv(in_channels, config.hidden, num_relations, heads=heads, **RGAT_OPTIONS)
            self.conv2 = nn.RGATConv(config.hidden, num_classes, num_relations, heads=heads, **RGAT_OPTIONS)
        elif model == "hgt":
            self.edge_types = [(TYPED_NODE, str(r), TYPED_NODE) for r in range(num_relations)]
            metadata = ([TYPED_NODE], self.edge_types)
            self.lin1 = torch.nn.Linear(in_channels, config.hidden)
            self.conv1 = nn.HGTConv(config.hidden, config.hidden, metadata, heads=config.heads)
            self.conv2 = nn.HGTConv(config.hidden, config.hidden, metadata, heads=config.heads)
            self.lin2 = torch.nn.Linear(config.hidden, num_classes)
        else:
            self.conv1, width = conv_layer(nn, model, in_channels, config.hidden, config, last=False)
            self.conv2, _ = conv_layer(nn, model, width, num_classes, config, last=True)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, *edge_type: torch.Tensor) -> torch.Tensor:
        x = self.drop(x, self.dropout, self.training)
        if self.model in ("rgcn", "rgat"):
            return self.conv2(self.activate_and_drop(self.conv1(x, edge_index, *edge_type)), edge_index, *edge_type)
        if self.model == "hgt":
            edges = self.edge_index_dict(edge_index, *edge_type)
            h = {TYPED_NODE: self.activation(self.lin1(x))}
            h = {TYPED_NODE: self.activate_and_drop(self.conv1(h, edges)[TYPED_NODE])}
            return self.lin2(self.conv2(h, edges)[TYPED_NODE])
        if self.model == "agnn":
            x = self.activate_and_drop(self.lin1(x))
            x = self.conv2(self.conv1(x, edge_index), edge_index)
            return self.lin2(self.drop(x, self.dropout, self.training))
        return self.conv2(self.activate_and_drop(self.conv1(x, edge_index)), edge_index)

    def edge_index_dict(self, edge_index: torch.Tensor, edge_type: torch.Tensor) -> dict:
        """HGT's ``edge_index`` per edge type of a relational graph: relation ``r``'s under ``edge_types[r]``;
        views of ``edge_index`` where its edges come sorted by relation, as a typed task's do (every epoch)."""
        if not bool((edge_type[1:] >= edge_type[:-1]).all()):
            order = torch.sort(edge_type, stable=True).indices
            edge_index, edge_type = edge_index[:, order], edge_type[order]
        counts = torch.bincount(edge_type, minlength=len(self.edge_types)).tolist()
        return dict(zip(self.edge_types, torch.split(edge_index, counts, dim=1), strict=True))

    def activate_and_drop(self, h: torch.Tensor) -> torch.Tensor:
        """The hidden layer's activation, then dropout (``activate_and_drop``)."""
        return activate_and_drop(h, self.activation, self.drop, self.dropout, self.training)
