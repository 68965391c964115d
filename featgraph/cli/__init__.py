"""The ``featgraph`` command (also ``python -m featgraph``) and its front ends: ``main`` parses the subcommands,
``train`` is ``featgraph train`` and ``featgraph demo`` over the training and distributed packages below."""

from .main import main

__all__ = ["main"]
