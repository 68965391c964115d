"""GNN layers with PyG's signatures (``forward(x, edge_index)``, also a ``featgraph.Graph``) and parameter
names, computed with featgraph's fused ops; with the same weights they match PyG's layers of the same name."""

from .agnn import AGNNConv
from .appnp import APPNP
from .edge_conv import EdgeConv
from .gat import GATConv
from .gcn import GCNConv
from .gin import GINConv
from .graph_conv import GraphConv
from .graph_input import as_graph
from .sage import SAGEConv
from .sg_conv import SGConv

__all__ = [
    "AGNNConv",
    "EdgeConv",
    "GATConv",
    "GCNConv",
    "GINConv",
    "SAGEConv",
    "as_graph",
    "GraphConv",
    "SGConv",
    "APPNP",
]
