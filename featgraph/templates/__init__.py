"""Sparse templates: generalized SpMM (vertex-wise) and SDDMM (edge-wise) with inlined UDFs."""

from .edge_sum import EdgeSumKernel, edge_sum
from .kernel import default_target
from .params import SDDMMParams, SpMMParams
from .sddmm import SDDMMKernel, sddmm
from .spmm import SpMMKernel, spmm

__all__ = [
    "EdgeSumKernel",
    "SDDMMKernel",
    "SDDMMParams",
    "SpMMKernel",
    "SpMMParams",
    "default_target",
    "edge_sum",
    "sddmm",
    "spmm",
]
