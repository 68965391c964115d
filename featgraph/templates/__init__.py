"""Sparse templates with inlined UDFs: generalized SpMM (per destination, a reduction over in-edges), SDDMM (per
edge) and the edge sum (a UDF summed over all edges), each a compiled, differentiable kernel; the gradient
kernels they derive include the winner template of max/min aggregations."""

# ``gradients`` registers the ``featgraph::kernel`` operator that a kernel's call runs
from . import gradients as gradients
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
