"""Generalized SpMM: per destination vertex, reduce the UDF's message over its in-edges."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..backends.cpu.codegen import row_stride
from ..backends.gpu.templates import default_rows_per_program, hub_capacity
from ..graph import Compressed, Graph
from ..kernel_spec import REDUCERS, indexed_by
from ..te.expr import ComputeOp
from .kernel import (
    TORCH_DTYPES,
    Fds,
    Kernel,
    Tuner,
    UdfOrOp,
    divide_by_in_degree,
    edge_list,
    in_dtype,
    template_kernel,
)
from .params import SpMMParams, default_num_partitions


class SpMMKernel(Kernel):
    """``kernel(**tensors)`` -> (num_dst_nodes, *out_shape); ``kernel.run(..., return_arg=True)`` also gives,
    for max/min, the user edge id that won each output element (-1 where a vertex has no in-edge)."""

    def __init__(self, graph: Graph, spec, target: str, *args: Any) -> None:
        super().__init__(graph, spec, target, *args)
        params: SpMMParams = spec.params
        index = torch.int32 if spec.index_dtype == "int32" else torch.int64
        self._degree = graph.in_degrees().contiguous()
        if params.strategy == "gas":
            if spec.reducer not in ("sum", "mean"):
                raise ValueError(f"strategy='gas' supports the sum and mean reducers; use 'gar' for {spec.reducer}")
            self._edges = edge_list(graph, "user", index, target)
            return
        parts = params.num_partitions  # the index arrays are shared by all kernels of the graph
        self._index = index
        self._csr = graph.csr(index) if parts == 1 else graph.source_partitions(parts, index).csr
        if params.row_order == "degree":
            self._rows = graph.cached(("degree-order", index), lambda: graph.degree_order("in").to(index))
        else:
            self._rows = None
        self._hubs: list[torch.Tensor] = []  # hybrid partitioning (GPU): hub slots and ids, passed last
        if params.hub_threshold:  # only the GPU template takes it (the CPU one has refused it by now)
            hubs = graph.hubs(params.hub_threshold, hub_capacity(spec))
            self._hubs = [hubs.slot, hubs.ids]

    def evaluate(self, tensors: dict[str, Any], want_arg: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        inputs = self._bind(tensors)
        n = self.graph.num_dst_nodes
        if self.spec.params.strategy == "gas":
            out = self._new_output((n, *self.spec.op.shape), self._compute, zero=True)
            self._launch([*self._edges, out, *inputs], [self.graph.num_edges, self._threads()])
            if self.spec.reducer == "mean":
                out = divide_by_in_degree(self.graph, out)
            return in_dtype(out, self._out_dtype), None
        argreduce = self.spec.reducer in ("max", "min")
        # the winners are kept across partitions in ``arg``; with one partition it is only made when asked for
        keep_arg = argreduce and (want_arg or self.spec.params.num_partitions > 1)
        out = self._new_output((n, *self.spec.op.shape), self._stored)
        arg = self._new_output((n, *self.spec.op.shape), torch.int64) if keep_arg else None
        csr = self._csr_by_id() if keep_arg else self._csr
        pointers = [*csr, self._rows, self._degree, out, arg, *inputs, *self._hubs]
        self._launch(pointers, [n, self.spec.params.num_partitions, self._threads()])
        return in_dtype(out, self._out_dtype), arg

    def _csr_by_id(self) -> Compressed:
        """What a max/min run that keeps its winners reads: rows (with segments, their runs) in edge id order,
        so ties go to the first edge; made on first use, so a max whose winners nobody asks for (a softmax's
        shift) reads the graph's shared source-ascending CSR and costs no copy."""
        parts = self.spec.params.num_partitions
        if parts == 1:
            return self.graph.csr(self._index, in_id_order=True)
        return self.graph.source_partitions(parts, self._index, in_id_order=True).csr

    def run(self, return_arg: bool = False, **tensors: Any) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``kernel(**tensors)``, or with ``return_arg`` the pair (output, winning user edge ids)."""
        if return_arg and self.spec.reducer not in ("max", "min"):
            raise ValueError(f"return_arg needs a max or min reducer, this kernel reduces with {self.spec.reducer}")
        out, arg = self._apply(tensors, want_arg=return_arg)
        return (out, arg) if return_arg else out


def spmm(
    graph: Graph,
    msgfunc: UdfOrOp,
    reducer: str,
    target: str | None = None,
    fds: Fds = None,
    tuner: Tuner | None = None,
    **template_params: Any,
) -> SpMMKernel:
    """Compile a generalized SpMM: ``out[v] = reducer over edges (u -> v) of msgfunc(u, v, e)``.

    ``reducer`` is sum, mean, max, min or logsumexp (``log sum_e exp(msg_e)``, streamed in one pass with a
    running max, so a softmax over in-edges needs one aggregation pass instead of a max and a sum).

    ``msgfunc(src, dst, eid)`` returns ``te.compute(shape, ...)``; ``fds(s, out)`` schedules its feature
    axes; ``template_params`` (``num_partitions``, ``num_feature_tiles``, ``row_order``, ``num_threads``;
    on the GPU ``rows_per_program`` and ``hub_threshold``, see ``SpMMParams``) set the traversal, defaulting
    to a heuristic from the graph, feature size and cache size; ``strategy`` "gas" aggregates
    edge-centrically. With a ``tuner`` (``featgraph.tuning.tune``: ``featgraph.spmm(..., tune=True)``) the
    kernel is the one it returns, searched over the parameters not given here, and the kernel's gradient
    kernels go through it too. Vertices without in-edges get 0 for every reducer.
    """
    if reducer not in REDUCERS:
        raise ValueError(f"reducer must be one of {REDUCERS}, got {reducer!r}")

    def make_params(op: ComputeOp, target: str) -> SpMMParams:
        params = dict(template_params)
        avg_degree = graph.num_edges / max(graph.num_dst_nodes, 1)
        if target == "gpu":
            params.setdefault("num_partitions", 1)  # source partitions are a CPU cache technique
            params.setdefault("rows_per_program", default_rows_per_program(avg_degree, math.prod(op.shape)))
        elif "num_partitions" not in params:
            rows = graph.num_src_nodes  # a source placeholder's rows, given or not
            source_bytes = sum(rows * row_stride(p) * TORCH_DTYPES[p.dtype].itemsize for p in indexed_by(op, "src"))
            params["num_partitions"] = default_num_partitions(source_bytes, avg_degree)
        return SpMMParams(**params)

    fixed = frozenset(template_params)
    return template_kernel("spmm", graph, msgfunc, reducer, target, fds, make_params, SpMMKernel, fixed, tuner)
