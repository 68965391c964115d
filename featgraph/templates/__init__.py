"""Sparse templates: generalized SpMM (vertex-wise) and SDDMM (edge-wise) with inlined UDFs."""

from .params import SDDMMParams, SpMMParams
from .sddmm import SDDMMKernel, sddmm
from .spmm import SpMMKernel, spmm

__all__ = ["SDDMMKernel", "SDDMMParams", "SpMMKernel", "SpMMParams", "sddmm", "spmm"]
