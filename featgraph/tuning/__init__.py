"""Autotuning: search template parameters and FDS factors per graph and shape, cached on disk; ``spmm`` and
``sddmm`` with the ``tune`` option (``featgraph.spmm``, ``featgraph.sddmm``)."""

from .search import TuneResult, synthetic_inputs, tune
from .space import Config
from .tunable import sddmm, spmm

__all__ = ["Config", "TuneResult", "sddmm", "spmm", "synthetic_inputs", "tune"]
