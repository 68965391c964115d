"""Generalized SDDMM: per edge, evaluate the UDF on its endpoints' (and its own) data."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from ..backends import gpu as gpu_backend
from ..backends.cpu.codegen import row_stride
from ..backends.cpu.templates import PREFETCH_DISTANCE
from ..graph import Graph
from ..kernel_spec import indexed_by, output_dtype, placeholder_shape
from ..te.expr import ComputeOp, Placeholder
from .kernel import (
    TORCH_DTYPES,
    Fds,
    Kernel,
    Tuner,
    UdfOrOp,
    edge_list,
    graph_rows,
    in_dtype,
    template_kernel,
    visit_order,
    walked_csr,
)
from .params import SDDMMParams, cpu_edge_order, default_num_partitions, default_write_buckets, gpu_edge_order

JUMP_SAMPLES = 1 << 20  # consecutive pairs the write-jump median looks at
MAX_ROWS_AHEAD = 64  # a CSR walk prefetches a row's run at most this many rows before it


def median_write_jump(graph: Graph, order: str) -> int:
    """Median distance in user edge ids between consecutively visited edges of an ``order`` visit (from up
    to ``JUMP_SAMPLES`` evenly spread pairs): how far apart an SDDMM's consecutive writes land. Cached."""

    def build() -> int:
        ids = visit_order(graph, order)
        if ids.numel() < 2:
            return 0
        first = torch.arange(0, ids.numel() - 1, max(1, (ids.numel() - 1) // JUMP_SAMPLES), device=ids.device)
        return int((ids[first + 1] - ids[first]).abs().median())

    return graph.cached(("write-jump", order), build)


def edge_traffic(op: ComputeOp) -> tuple[int, int]:
    """(bytes an edge of ``op`` gathers from its endpoints' rows, bytes it streams: its output row and its
    edge-data rows)."""

    def row(p: Placeholder) -> int:
        return math.prod(p.shape[1:]) * TORCH_DTYPES[p.dtype].itemsize

    gathered = sum(row(p) for kind in ("src", "dst") for p in indexed_by(op, kind))
    streamed = math.prod(op.shape) * TORCH_DTYPES[output_dtype(op)].itemsize
    return gathered, streamed + sum(row(p) for p in indexed_by(op, "eid"))


def gpu_edge_order_for(graph: Graph, op: ComputeOp) -> str:
    """The GPU's default edge order for a kernel over ``graph`` reading ``op``'s placeholders."""
    rows = graph_rows(graph)
    sizes = (math.prod(placeholder_shape(op, p, rows)) * TORCH_DTYPES[p.dtype].itemsize for p in op.placeholders)
    input_bytes = sum(sizes)
    return gpu_edge_order(input_bytes, gpu_backend.l2_cache_bytes(graph.device))


def write_staging(graph: Graph, order: str, index: torch.dtype, buckets: int) -> list[torch.Tensor]:
    """(slots, sources) for an SDDMM visiting edges in ``order`` with ``buckets`` write buckets: the j-th
    visited edge writes row ``slots[j]`` of a staging buffer whose rows are grouped by bucket of user edge
    ids (visit order kept within a bucket); output row e then copies staging row ``sources[e]``. Cached."""

    def build() -> list[torch.Tensor]:
        ids = visit_order(graph, order)
        num_edges = ids.numel()
        bucket = ids.to(torch.int64) * buckets  # (int64: E x buckets can pass 2^31)
        bucket.floor_divide_(max(1, num_edges))
        visit = torch.sort(bucket, stable=True).indices  # staging row -> visit
        del bucket  # the index arrays are built in ``index`` directly: a few E-sized temporaries at a time
        rows = torch.arange(num_edges, dtype=index, device=ids.device)
        slots = torch.empty_like(rows).index_put_((visit,), rows)
        sources = torch.empty_like(rows).index_put_((ids[visit],), rows)
        return [slots, sources]

    return graph.cached(("write-staging", order, index, buckets), build)


class SDDMMKernel(Kernel):
    """``kernel(**tensors)`` -> (num_edges, *out_shape), rows in the order of the graph's edges."""

    def __init__(self, graph: Graph, spec, target: str, *args: Any) -> None:
        super().__init__(graph, spec, target, *args)
        index = torch.int32 if spec.index_dtype == "int32" else torch.int64
        params = spec.params
        if target == "cpu" and spec.kind == "sddmm" and params.edge_order == "csr":  # walked: no edge list
            self._edges = walked_csr(graph, params.num_partitions, index)
            rows, parts = graph.num_dst_nodes, params.num_partitions
            ahead = max(1, min(MAX_ROWS_AHEAD, round(PREFETCH_DISTANCE * rows * parts / max(graph.num_edges, 1))))
            self._walk = [rows, parts, ahead]
        else:
            self._edges = edge_list(graph, params.edge_order, index, target)
            self._walk = []
        buckets = params.write_buckets
        self._staging = write_staging(graph, params.edge_order, index, buckets) if buckets else None

    def evaluate(self, tensors: dict[str, Any], want_arg: bool) -> tuple[torch.Tensor, None]:
        inputs = self._bind(tensors)
        shape = (self.graph.num_edges, *self.spec.op.shape)
        out = self._new_output(shape, self._stored)
        counts = [self.graph.num_edges, self._threads(), *self._walk]
        if self._staging is None:
            self._launch([*self._edges, out, *inputs], counts)
        else:
            stage = self._new_output(shape, self._stored)
            self._launch([*self._edges, stage, *self._staging, out, *inputs], counts)
        return in_dtype(out, self._out_dtype), None


def sddmm(
    graph: Graph,
    edgefunc: UdfOrOp,
    target: str | None = None,
    fds: Fds = None,
    tuner: Tuner | None = None,
    **template_params: Any,
) -> SDDMMKernel:
    """Compile a generalized SDDMM: ``out[e] = edgefunc(src[e], dst[e], e)`` for every edge.

    ``template_params``: ``edge_order`` (default: the user's order on a bipartite graph, such as a sampled
    block that serves one step, where ordering its edges would cost more than it saves; else the device's,
    ``params.cpu_edge_order`` / ``gpu_edge_order``; "hilbert", "user", "csr"), ``num_partitions`` (CPU, "csr":
    the source segments the CSR is walked in; default from the source rows' bytes,
    ``params.default_num_partitions``), ``num_feature_tiles``, ``num_threads``, ``write_buckets`` (CPU; default
    from ``params.default_write_buckets`` where the walk is one segment); ``tuner`` as for ``spmm``. The
    output follows the user's edge order whatever order the kernel visits edges in.
    """

    def make_params(op: ComputeOp, target: str) -> SDDMMParams:
        one_step = {"edge_order": "user"} if graph.is_bipartite else {}
        device = gpu_edge_order_for(graph, op) if target == "gpu" else cpu_edge_order(*edge_traffic(op))
        chosen = {"edge_order": device, **one_step, **template_params}
        if target == "cpu" and chosen["edge_order"] == "csr" and "num_partitions" not in chosen:
            rows = graph.num_src_nodes  # a source placeholder's rows, given or not
            source_bytes = sum(rows * row_stride(p) * TORCH_DTYPES[p.dtype].itemsize for p in indexed_by(op, "src"))
            chosen["num_partitions"] = default_num_partitions(source_bytes)
            if "write_buckets" in chosen and chosen["write_buckets"]:
                chosen["num_partitions"] = 1  # staged writes follow one walk of the CSR
        params = SDDMMParams(**chosen)
        if target == "gpu" and params.write_buckets:
            raise ValueError("write_buckets stages CPU writes; GPU edge kernels write in the user's edge order")
        if (
            target == "cpu"
            and "write_buckets" not in template_params
            and params.edge_order != "user"
            and params.num_partitions == 1
        ):
            row_bytes = math.prod(op.shape) * TORCH_DTYPES[output_dtype(op)].itemsize
            jump = median_write_jump(graph, params.edge_order)
            buckets = default_write_buckets(graph.num_edges * row_bytes, jump * row_bytes, row_bytes)
            params = replace(params, write_buckets=buckets)
        return params

    fixed = frozenset(template_params)
    return template_kernel("sddmm", graph, edgefunc, None, target, fds, make_params, SDDMMKernel, fixed, tuner)
