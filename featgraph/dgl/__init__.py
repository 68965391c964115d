"""featgraph as DGL's kernel backend: after ``featgraph.dgl.use()``, DGL's message passing, ``dgl.ops`` and
every ``dgl.nn`` layer run on featgraph's kernels with no change to the user's code; ``DataLoader`` runs DGL's
mini-batch loading (DGL's graph, seeds and samplers) on featgraph's loaders.

``use``/``unuse`` (or ``with featgraph.dgl.use(): ...``) switch the routing, ``routed`` lists which DGL
entry points featgraph serves and which stay DGL's, ``calls`` counts who served each call. DGL is imported
only when routing starts.
"""

from __future__ import annotations

from .dataloading import DataLoader
from .graphs import graph_of
from .kernels import calls, reset_calls
from .routing import ENTRY_POINTS, EntryPoint, Route, Routing, backend, is_active, routed, unuse, use

__all__ = [
    "DataLoader",
    "ENTRY_POINTS",
    "EntryPoint",
    "Route",
    "Routing",
    "backend",
    "calls",
    "graph_of",
    "is_active",
    "reset_calls",
    "routed",
    "unuse",
    "use",
]
