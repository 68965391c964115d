"""Edge sum: the UDF summed over every edge into one dense tensor (no per-vertex or per-edge output).

This is the shape of a dense parameter's gradient (a weight matrix used in every message): each edge adds
its contribution, and nothing of size E x parameter is ever stored.
"""

from __future__ import annotations

from typing import Any

import torch

from ..graph import Graph
from ..te.expr import ComputeOp
from .kernel import Fds, Tuner, UdfOrOp, in_dtype, template_kernel
from .params import SDDMMParams
from .sddmm import SDDMMKernel, gpu_edge_order_for


class EdgeSumKernel(SDDMMKernel):
    """``kernel(**tensors)`` -> tensor of the compute's shape: the sum over all edges (same edge list and
    order as an SDDMM, a different output)."""

    def evaluate(self, tensors: dict[str, Any], want_arg: bool) -> tuple[torch.Tensor, None]:
        inputs = self._bind(tensors)
        out = self._new_output(self.spec.op.shape, self._compute, zero=True)
        self._launch([*self._edges, out, *inputs], [self.graph.num_edges, self._threads()])
        return in_dtype(out, self._out_dtype), None


def edge_sum(
    graph: Graph,
    edgefunc: UdfOrOp,
    target: str | None = None,
    fds: Fds = None,
    tuner: Tuner | None = None,
    **template_params: Any,
) -> EdgeSumKernel:
    """Compile ``out = sum over edges e of edgefunc(src[e], dst[e], e)`` (deterministic for a fixed thread
    count). ``template_params``: ``edge_order`` (default "hilbert") and ``num_threads``; ``tuner`` as for
    ``spmm``."""

    def make_params(op: ComputeOp, target: str) -> SDDMMParams:
        on_gpu = {"edge_order": gpu_edge_order_for(graph, op)} if target == "gpu" else {}
        params = SDDMMParams(**{**on_gpu, **template_params})
        if params.num_partitions != 1:
            raise ValueError("num_partitions: edge_sum visits an edge list, not the CSR in source segments; it takes 1")
        return params

    fixed = frozenset(template_params)
    return template_kernel("edge_sum", graph, edgefunc, None, target, fds, make_params, EdgeSumKernel, fixed, tuner)
