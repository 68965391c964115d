"""SpMM and SDDMM on tensor cores (TC-GNN), differentiable; forward, gradients and shape rule side by side.

``tc_spmm``: ``out[v] = sum over edges u -> v of w[e] * x[u]``. Forward: block SpMM over the graph's
translation (dense 16 x 16 blocks of condensed neighbour columns, or with ``tile_rows=8`` FlashSparse's 8 x 1
vectors, 16 to a block). Gradient for ``x``: the same over the
*reversed* graph's translation (no symmetry assumed). Gradient for ``w``: block SDDMM.
``tc_sddmm``: ``out[e] = x_src[u] . x_dst[v]``: block SDDMM ``x_dst[v] . x_src[u]`` for every cell, read
back per edge (duplicate edges share a cell and each gets its value); gradients are two weighted block
SpMMs. Both run on the GPU target only: CUDA tensors, or CPU tensors under Triton's interpreter.
"""

from __future__ import annotations

import torch

from ..backends import gpu
from ..graph import Graph
from ..graph.tc_translation import WINDOW_ROWS, TCTranslation
from .checks import check_graph, check_tensor


def _translation(g: Graph, rows: int) -> TCTranslation:
    from ..backends.gpu.tensor_core import BLOCK_WIDTH

    return g.tc_translation(BLOCK_WIDTH, rows)


def _block_window(g: Graph, tr: TCTranslation) -> torch.Tensor:
    """The window of every block."""

    def build() -> torch.Tensor:
        windows = torch.arange(tr.num_windows, device=tr.window_block_ptr.device)
        return torch.repeat_interleave(windows, tr.window_block_ptr.diff())

    return g.cached(("tc-block-window", tr.window_rows), build)


def _spmm(g: Graph, x: torch.Tensor, weight: torch.Tensor | None, rows: int) -> torch.Tensor:
    from ..backends.gpu.tensor_core import block_spmm

    tr = _translation(g, rows)
    if weight is None:  # an unweighted graph's tiles are built once per dtype and kept with the graph
        tiles = g.cached(("tc-tiles", rows, x.dtype), lambda: tr.dense_blocks().to(x.dtype))
    else:
        tiles = tr.dense_blocks(weight).to(x.dtype)
    return block_spmm(tr.window_block_ptr, tr.block_columns, tiles, x)


def tensor_core_precision(dtype: torch.dtype) -> bool:
    """Whether tensor cores compute in ``dtype`` at the precision torch is asked for: float16 and bfloat16
    (accumulated in float32), float32 only where torch allows TF32 matrix products
    (``torch.set_float32_matmul_precision("high")`` or ``"medium"``)."""
    if dtype in (torch.float16, torch.bfloat16):
        return True
    return dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest"


def _sddmm(g: Graph, x_src: torch.Tensor, x_dst: torch.Tensor, rows: int) -> torch.Tensor:
    from ..backends.gpu.tensor_core import block_sddmm

    tr = _translation(g, rows)
    cells = block_sddmm(_block_window(g, tr), tr.block_columns, x_dst.contiguous(), x_src.contiguous(), rows)
    return cells[tr.edge_block, tr.edge_row, tr.edge_col]


class _TensorCoreSpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, g: Graph, x: torch.Tensor, weight: torch.Tensor | None, rows: int) -> torch.Tensor:  # noqa: D102
        ctx.g, ctx.rows = g, rows
        ctx.save_for_backward(x, weight)
        return _spmm(g, x, weight, rows)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # noqa: D102
        x, weight = ctx.saved_tensors
        g: Graph = ctx.g
        grad_out = grad_out.contiguous()
        grad_x = _spmm(g.reverse(), grad_out, weight, ctx.rows) if ctx.needs_input_grad[1] else None
        grad_w = None
        if weight is not None and ctx.needs_input_grad[2]:
            grad_w = _sddmm(g, x, grad_out, ctx.rows).to(weight.dtype)
        return None, grad_x, grad_w, None


class _TensorCoreSDDMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, g: Graph, x_src: torch.Tensor, x_dst: torch.Tensor, rows: int) -> torch.Tensor:  # noqa: D102
        ctx.g, ctx.rows = g, rows
        ctx.save_for_backward(x_src, x_dst)
        return _sddmm(g, x_src, x_dst, rows).to(x_src.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # noqa: D102
        x_src, x_dst = ctx.saved_tensors
        g: Graph = ctx.g
        weight = grad_out.contiguous()
        rows = ctx.rows
        grad_src = _spmm(g.reverse(), x_dst, weight, rows) if ctx.needs_input_grad[1] else None  # over out-edges
        grad_dst = _spmm(g, x_src, weight, rows) if ctx.needs_input_grad[2] else None  # sum over in-edges
        return None, grad_src, grad_dst, None


def tc_spmm(g: Graph, x: torch.Tensor, edge_weight: torch.Tensor | None = None, tile_rows: int = 16) -> torch.Tensor:
    """``out[v] = sum over in-edges e = (u -> v) of edge_weight[e] * x[u]`` (weight 1 when None) on tensor
    cores; ``x`` of shape (num_nodes, d), any d; float32 runs in TF32 (about 3 significant digits),
    float16/bfloat16 accumulate in float32, float64 is exact. Differentiable in ``x`` and ``edge_weight``.
    ``tile_rows``: 16, TC-GNN's 16 x 16 tiles, or 8, FlashSparse's 8 x 1 vectors (half the tile cells where
    sources are not shared across 16 rows, more gathered rows where they are: ``featgraph bench tc-fill``)."""
    _check(g, tile_rows, x=x)
    if edge_weight is not None:
        check_tensor("edge_weight", edge_weight, dims=1, rows=g.num_edges, rows_are="one per edge", like=x)
    return _TensorCoreSpMM.apply(g, x.contiguous(), edge_weight, tile_rows)


def tc_sddmm(g: Graph, x_src: torch.Tensor, x_dst: torch.Tensor, tile_rows: int = 16) -> torch.Tensor:
    """``out[e] = x_src[u] . x_dst[v]`` for every edge ``e = (u -> v)``, in the graph's edge order, on tensor
    cores (dot-product attention scores); both (num_nodes, d), any d, same precision rules and ``tile_rows``
    as ``tc_spmm``. Differentiable in both."""
    _check(g, tile_rows, x_src=x_src, x_dst=x_dst)
    if x_src.shape != x_dst.shape or x_src.dtype != x_dst.dtype:
        raise ValueError(
            f"x_src and x_dst must match: {tuple(x_src.shape)} {x_src.dtype} vs {tuple(x_dst.shape)} {x_dst.dtype}"
        )
    return _TensorCoreSDDMM.apply(g, x_src.contiguous(), x_dst.contiguous(), tile_rows)


def _check(g: Graph, tile_rows: object, **features: torch.Tensor) -> None:
    if type(tile_rows) is not int or tile_rows not in WINDOW_ROWS:
        raise ValueError(
            f"tile_rows must be 16 (TC-GNN's 16 x 16 tiles) or 8 (FlashSparse's 8 x 1 vectors), got {tile_rows!r}"
        )
    check_graph(g)
    for name, x in features.items():
        check_tensor(name, x, dims=2, rows=g.num_nodes, rows_are="the graph's nodes", device=g.device)
    gpu.check_device(g.device)
