"""Autotuning: search template parameters and FDS factors per graph and shape, cached on disk."""

from .search import TuneResult, synthetic_inputs, tune
from .space import Config

__all__ = ["Config", "TuneResult", "synthetic_inputs", "tune"]
