"""Graph formats: the ``Graph`` object and the views it builds (CSR, CSC, orders, partitions, TC blocks), and
``HeteroGraph``, a typed graph over one homogeneous ``Graph`` sorted by edge type."""

from .formats import Compressed
from .graph import Graph
from .hetero import HeteroGraph
from .partition import SourcePartitions
from .tc_translation import TCTranslation

__all__ = ["Compressed", "Graph", "HeteroGraph", "SourcePartitions", "TCTranslation"]
