"""Generalized SDDMM: per edge, evaluate the UDF on its endpoints' (and its own) data."""

from __future__ import annotations

from typing import Any

import torch

from ..graph import Graph
from ..te.expr import ComputeOp
from .kernel import Fds, Kernel, Udf, edge_list, template_kernel
from .params import SDDMMParams, gpu_defaults


class SDDMMKernel(Kernel):
    """``kernel(**tensors)`` -> (num_edges, *out_shape), rows in the order of the graph's edges."""

    def __init__(self, graph: Graph, spec, target: str, *args: Any) -> None:
        super().__init__(graph, spec, target, *args)
        index = torch.int32 if spec.index_dtype == "int32" else torch.int64
        self._edges = edge_list(graph, spec.params.edge_order, index)

    def evaluate(self, tensors: dict[str, Any], want_arg: bool) -> tuple[torch.Tensor, None]:
        inputs = self._bind(tensors)
        out = self._new_output((self.graph.num_edges, *self.spec.op.shape), self._compute)
        self._launch([*self._edges, out, *inputs], [self.graph.num_edges, self._threads()])
        return out.to(self._out_dtype), None


def sddmm(
    graph: Graph, edgefunc: Udf, target: str | None = None, fds: Fds = None, tune: bool = False, **template_params: Any
) -> SDDMMKernel:
    """Compile a generalized SDDMM: ``out[e] = edgefunc(src[e], dst[e], e)`` for every edge.

    ``template_params``: ``edge_order`` ("hilbert" default, "user", "csr"), ``num_feature_tiles``,
    ``num_threads``; ``tune=True`` searches those not given and the FDS split factor. The output follows
    the user's edge order whatever order the kernel visits edges in.
    """

    def make_params(op: ComputeOp, target: str) -> SDDMMParams:
        return SDDMMParams(**{**gpu_defaults(target), **template_params})

    fixed = frozenset(template_params)
    return template_kernel("sddmm", graph, edgefunc, None, target, fds, make_params, SDDMMKernel, fixed, tune)
