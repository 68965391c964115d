"""TC-GNN's block SpMM and SDDMM on tensor cores, over the graph's sparse translation.

Each 16-row window of destinations holds dense 16 x 16 blocks whose columns are the window's distinct
sources, condensed (``featgraph.graph.tc_translation``). SpMM: one program per window and feature block
multiplies each block by the gathered source rows with ``tl.dot`` (TF32 for float32 inputs, fp32
accumulation for float16/bfloat16, IEEE for float64). SDDMM: one program per block multiplies the window's
rows of one operand by the block's gathered rows of the other, transposed, giving the block's 16 x 16 dot
products. Any feature length: features are processed in masked blocks of at least 16 lanes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .loader import interpreter_scalar_index, interpreting

if interpreting():
    interpreter_scalar_index()  # the block loops' bounds are loaded scalars

BLOCK_WIDTH = 16  # tl.dot needs K >= 16 on GPUs
WINDOW = 16
PRECISION = {torch.float32: "tf32", torch.float64: "ieee", torch.float16: "ieee", torch.bfloat16: "ieee"}


def _accumulator(dtype: torch.dtype) -> tl.dtype:
    return tl.float64 if dtype == torch.float64 else tl.float32


@triton.jit(do_not_specialize=["num_nodes"])  # per graph: one compile for all
def _block_spmm(
    block_ptr, columns, tiles, x, out, num_nodes, width,
    BLOCK_D: tl.constexpr, BW: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    window = tl.program_id(0)
    of = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    rows = window * 16 + tl.arange(0, 16)
    slots = tl.arange(0, BW)
    acc = tl.zeros([16, BLOCK_D], ACC)
    for b in range(tl.load(block_ptr + window), tl.load(block_ptr + window + 1)):
        a = tl.load(tiles + b * 16 * BW + tl.arange(0, 16)[:, None] * BW + slots[None, :])
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
    BLOCK_D: tl.constexpr, BW: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    rows = tl.load(block_window + b) * 16 + tl.arange(0, 16)
    slots = tl.arange(0, BW)
    cols = tl.load(columns + b * BW + slots)
    acc = tl.zeros([16, BW], ACC)
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
    tl.store(out + b * 16 * BW + tl.arange(0, 16)[:, None] * BW + slots[None, :], acc)


def feature_block(width: int) -> int:
    return max(16, min(128, triton.next_power_of_2(width)))


def block_spmm(block_ptr: torch.Tensor, columns: torch.Tensor, tiles: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``out[v] = sum over blocks of v's window of tile[v's row] @ x[block columns]``; tiles in x's dtype."""
    n, width = x.shape
    out = torch.empty_like(x)
    windows = block_ptr.numel() - 1
    if n == 0 or width == 0:
        return out
    block = feature_block(width)
    grid = (windows, triton.cdiv(width, block))
    _block_spmm[grid](
        block_ptr, columns, tiles, x, out, n, width, BLOCK_D=block, BW=BLOCK_WIDTH, PRECISION=PRECISION[x.dtype],
        ACC=_accumulator(x.dtype),
    )  # fmt: skip
    return out


def block_sddmm(
    block_window: torch.Tensor, columns: torch.Tensor, left: torch.Tensor, right: torch.Tensor
) -> torch.Tensor:
    """Per block, the (16, BLOCK_WIDTH) dot products ``left[window rows] . right[block columns]``."""
    blocks = columns.shape[0]
    dtype = torch.float64 if left.dtype == torch.float64 else torch.float32
    out = torch.zeros((blocks, WINDOW, BLOCK_WIDTH), dtype=dtype, device=left.device)
    if blocks == 0 or left.shape[1] == 0:
        return out
    block = feature_block(left.shape[1])
    _block_sddmm[(blocks,)](
        block_window, columns, left, right, out, left.shape[0], left.shape[1], BLOCK_D=block, BW=BLOCK_WIDTH,
        PRECISION=PRECISION[left.dtype], ACC=_accumulator(left.dtype),
    )  # fmt: skip
    return out
