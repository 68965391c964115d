"""Sparse templates: generalized SpMM (vertex-wise) and SDDMM (edge-wise) with inlined UDFs."""

from .edge_sum import EdgeSumKernel, edge_sum
from .params import SDDMMParams, SpMMParams
from .sddmm import SDDMMKernel, sddmm
from .spmm import SpMMKernel, spmm

__all__ = ["EdgeSumKernel", "edge_sum", "SDDMMKernel", "SDDMMParams", "SpMMKernel", "SpMMParams", "sddmm", "spmm"]
