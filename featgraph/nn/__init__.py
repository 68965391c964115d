"""GNN layers built on PyG's layer classes of the same name (constructor, parameters, hooks, ...), their
forward on featgraph's fused ops where the call allows and PyG's own otherwise (``FallbackWarning``); they also
take a ``featgraph.Graph``. ``accelerate(model)`` switches an existing PyG model's layers (and its
``torch.nn.Dropout`` modules) to them in place; ``Dropout`` and ``functional.dropout`` are torch's dropout on
featgraph's hashed masks; ``TypedLinear`` and ``RelGraphConv`` are DGL's typed linear layer and R-GCN layer on
featgraph's grouped products and relational aggregation; ``HGTConv`` runs PyG's typed-graph transformer over
all node and edge types at once.
Requires torch_geometric."""

from ..graph.conversion import as_graph
from . import functional
from .accelerate import Acceleration, accelerate
from .agnn import AGNNConv
from .appnp import APPNP
from .dropout import Dropout
from .edge_conv import EdgeConv
from .gat import GATConv
from .gatv2_conv import GATv2Conv
from .gcn import GCNConv
from .gin import GINConv
from .gine_conv import GINEConv
from .graph_conv import GraphConv
from .hetero_conv import HeteroConv
from .hetero_graph_conv import HeteroGraphConv
from .hgt_conv import HGTConv
from .pyg_layer import FallbackWarning
from .rel_graph_conv import RelGraphConv
from .rgat_conv import RGATConv
from .rgcn_conv import FastRGCNConv, RGCNConv
from .sage import SAGEConv
from .sg_conv import SGConv
from .transformer_conv import TransformerConv
from .typed_linear import TypedLinear

__all__ = [
    "AGNNConv",
    "Dropout",
    "EdgeConv",
    "GATConv",
    "GCNConv",
    "GINConv",
    "SAGEConv",
    "as_graph",
    "GraphConv",
    "SGConv",
    "APPNP",
    "Acceleration",
    "FallbackWarning",
    "accelerate",
    "functional",
    "GINEConv",
    "GATv2Conv",
    "TransformerConv",
    "RGCNConv",
    "FastRGCNConv",
    "RGATConv",
    "HGTConv",
    "TypedLinear",
    "RelGraphConv",
    "HeteroConv",
    "HeteroGraphConv",
]
