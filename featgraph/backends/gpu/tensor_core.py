"""TC-GNN's block SpMM and SDDMM on tensor cores, over the graph's sparse translation.

Each window of 16 destination rows (or 8: FlashSparse's 8 x 1 vectors, 16 side by side) holds dense
blocks of 16 columns, the window's distinct sources, condensed (``featgraph.graph.tc_translation``). SpMM:
one program per window and feature block multiplies each block by the gathered source rows with ``tl.dot``
(TF32 for float32 inputs, fp32 accumulation for float16/bfloat16, IEEE for float64; Triton pads an 8-row
product to the MMA's 16). SDDMM: one program per block multiplies the window's rows of one operand by the
block's gathered rows of the other, transposed, giving the block's dot products. Any feature length:
features are processed in masked blocks of at least 16 lanes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dot import accumulator, dot_block

BLOCK_WIDTH = 16  # tl.dot needs K >= 16 on GPUs for 16-bit inputs
PRECISION = {torch.float32: "tf32", torch.float64: "ieee", torch.float16: "ieee", torch.bfloat16: "ieee"}


@triton.jit(do_not_specialize=["num_nodes"])  # per graph: one compile for all
def _block_spmm(
    block_ptr, columns, tiles, x, out, num_nodes, width,
    BLOCK_D: tl.constexpr, WIN: tl.constexpr, BW: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    window = tl.program_id(0)
    of = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    rows = window * WIN + tl.arange(0, WIN)
    slots = tl.arange(0, BW)
    acc = tl.zeros([WIN, BLOCK_D], ACC)
    for b in range(tl.load(block_ptr + window), tl.load(block_ptr + window + 1)):
        a = tl.load(tiles + b * WIN * BW + tl.arange(0, WIN)[:, None] * BW + slots[None, :])
        cols = tl.load(columns + b * BW + slots)
        xb = tl.load(
            x + cols.to(tl.int64)[:, None] * width + of[None, :],
            mask=(cols >= 0)[:, None] & (of < width)[None, :],
            other=0,
        )
        acc += tl.dot(a, xb, input_precision=PRECISION, out_dtype=acc.dtype)
    mask = (rows < num_nodes)[:, None] & (of < width)[None, :]
    tl.store(out + rows.to(tl.int64)[:, None] * width + of[None, :], acc.to(out.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["num_nodes"])  # per graph: one compile for all
def _block_sddmm(
    block_window, columns, left, right, out, num_nodes, width,
    BLOCK_D: tl.constexpr, WIN: tl.constexpr, BW: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    rows = tl.load(block_window + b) * WIN + tl.arange(0, WIN)
    slots = tl.arange(0, BW)
    cols = tl.load(columns + b * BW + slots)
    acc = tl.zeros([WIN, BW], ACC)
    for d0 in range(0, width, BLOCK_D):
        of = d0 + tl.arange(0, BLOCK_D)
        lb = tl.load(
            left + rows.to(tl.int64)[:, None] * width + of[None, :],
            mask=(rows < num_nodes)[:, None] & (of < width)[None, :],
            other=0,
        )
        rb = tl.load(
            right + cols.to(tl.int64)[None, :] * width + of[:, None],
            mask=(cols >= 0)[None, :] & (of < width)[:, None],
            other=0,
        )
        acc += tl.dot(lb, rb, input_precision=PRECISION, out_dtype=acc.dtype)
    tl.store(out + b * WIN * BW + tl.arange(0, WIN)[:, None] * BW + slots[None, :], acc)


def block_spmm(block_ptr: torch.Tensor, columns: torch.Tensor, tiles: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``out[v] = sum over blocks of v's window of tile[v's row] @ x[block columns]``; tiles (blocks, window
    rows, ``BLOCK_WIDTH``) in x's dtype."""
    n, width = x.shape
    out = torch.empty_like(x)
    windows = block_ptr.numel() - 1
    if n == 0 or width == 0:
        return out
    block = dot_block(width)
    grid = (windows, triton.cdiv(width, block))
    _block_spmm[grid](
        block_ptr, columns, tiles, x, out, n, width, BLOCK_D=block, WIN=tiles.shape[1], BW=BLOCK_WIDTH,
        PRECISION=PRECISION[x.dtype], ACC=accumulator(x.dtype),
    )  # fmt: skip
    return out


def block_sddmm(
    block_window: torch.Tensor, columns: torch.Tensor, left: torch.Tensor, right: torch.Tensor, window_rows: int
) -> torch.Tensor:
    """Per block, the (window_rows, BLOCK_WIDTH) dot products ``left[window rows] . right[block columns]``."""
    blocks = columns.shape[0]
    dtype = torch.float64 if left.dtype == torch.float64 else torch.float32
    out = torch.zeros((blocks, window_rows, BLOCK_WIDTH), dtype=dtype, device=left.device)
    if blocks == 0 or left.shape[1] == 0:
        return out
    block = dot_block(left.shape[1])
    _block_sddmm[(blocks,)](
        block_window, columns, left, right, out, left.shape[0], left.shape[1], BLOCK_D=block, WIN=window_rows,
        BW=BLOCK_WIDTH, PRECISION=PRECISION[left.dtype], ACC=accumulator(left.dtype),
    )  # fmt: skip
    return out
