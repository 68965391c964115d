"""Graph formats: the ``Graph`` object and the views it builds (CSR, CSC, orders, partitions, TC blocks)."""

from .formats import Compressed
from .graph import Graph
from .partition import SourcePartitions
from .tc_translation import TCTranslation

__all__ = ["Compressed", "Graph", "SourcePartitions", "TCTranslation"]
