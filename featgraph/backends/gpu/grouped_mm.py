"""Grouped matrix products in one launch: ``segment_mm``'s segment products and their weight gradient.

A typed graph's relations are consecutive row segments, segment ``k`` times its own weight ``b[k]``; a loop of
``torch.mm`` makes a launch (and a Python round) per relation and per gradient, which on a GPU costs more than
the products of small relations (R-GCN on the AM shape has 266). Here the segments' row tiles are one grid:

- products: one program per (tile of ``BLOCK_ROWS`` rows of one segment, column block), ``tl.dot`` over the
  inner dimension in blocks; ``a``'s rows read directly or through an index (``a_rows``: R-GCN's pairs read their
  vertices' rows, never gathered into a copy);
- weight gradient ``db[k] = a_k^T grad_k``: one program per (chunk of ``CHUNK_ROWS`` rows of one segment,
  inner block, column block) adds its chunk's product into ``db[k]`` with atomic adds, so a large relation is
  spread over many programs (a relation's sum is then in no fixed order: float32 results vary in the last
  bits from run to run, as torch's own atomic scatters do).

float32 products use TF32 where torch allows it for its own (``torch.get_float32_matmul_precision()``), IEEE
otherwise; float16/bfloat16 accumulate in float32, float64 in float64.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...recent import Recent
from .dot import accumulator, dot_block

BLOCK_ROWS = 64  # rows of a product tile
CHUNK_ROWS = 1024  # rows one weight-gradient program sums
# tile lists remembered per segment lengths (a layer's relations repeat every call)
_tiles: Recent[tuple[torch.Tensor, ...]] = Recent(64)


def _precision(dtype: torch.dtype) -> str:
    if dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return "ieee"


@triton.jit(do_not_specialize=["inner", "cols"])
def _segment_products(
    a, a_rows, b, out, tile_segment, tile_start, tile_end, inner, cols, b_segment, b_inner, b_col,
    GATHER: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr,
    PRECISION: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0)
    segment = tl.load(tile_segment + tile).to(tl.int64)
    rows = tl.load(tile_start + tile) + tl.arange(0, BLOCK_R)
    inside = rows < tl.load(tile_end + tile)
    reads = tl.load(a_rows + rows, mask=inside, other=0).to(tl.int64) if GATHER else rows.to(tl.int64)
    columns = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_R, BLOCK_C], ACC)
    for k0 in range(0, inner, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(a + reads[:, None] * inner + ks[None, :], mask=inside[:, None] & (ks < inner)[None, :], other=0)
        w = tl.load(
            b + segment * b_segment + ks[:, None] * b_inner + columns[None, :] * b_col,
            mask=(ks < inner)[:, None] & (columns < cols)[None, :],
            other=0,
        )
        acc += tl.dot(x, w, input_precision=PRECISION, out_dtype=ACC)
    mask = inside[:, None] & (columns < cols)[None, :]
    tl.store(out + rows.to(tl.int64)[:, None] * cols + columns[None, :], acc.to(out.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["inner", "cols"])
def _segment_weight_gradient(
    a, a_rows, grad, grad_rows, out, chunk_segment, chunk_start, chunk_end, inner, cols,
    GATHER_A: tl.constexpr, GATHER_G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_C: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    chunk = tl.program_id(0)
    segment = tl.load(chunk_segment + chunk).to(tl.int64)
    end = tl.load(chunk_end + chunk)
    ks = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    columns = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_K, BLOCK_C], ACC)
    for r0 in range(tl.load(chunk_start + chunk), end, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        inside = rows < end
        left = tl.load(a_rows + rows, mask=inside, other=0).to(tl.int64) if GATHER_A else rows.to(tl.int64)
        right = tl.load(grad_rows + rows, mask=inside, other=0).to(tl.int64) if GATHER_G else rows.to(tl.int64)
        x = tl.load(a + left[None, :] * inner + ks[:, None], mask=inside[None, :] & (ks < inner)[:, None], other=0)
        g = tl.load(
            grad + right[:, None] * cols + columns[None, :], mask=inside[:, None] & (columns < cols)[None, :], other=0
        )
        acc += tl.dot(x, g, input_precision=PRECISION, out_dtype=ACC)
    mask = (ks < inner)[:, None] & (columns < cols)[None, :]
    tl.atomic_add(out + segment * inner * cols + ks[:, None] * cols + columns[None, :], acc, mask=mask)


def segment_tiles(lengths: list[int], rows: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(segment, first row, end row) of each tile of at most ``rows`` rows of each segment, on ``device``;
    empty segments have none. Remembered for the 64 most recent lengths."""
    return _tiles.get((tuple(lengths), rows, device), lambda: _tiles_of(lengths, rows, device))


def _tiles_of(lengths: list[int], rows: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    counts = torch.tensor(lengths, dtype=torch.int64)
    ends = counts.cumsum(0)
    per_segment = (counts + rows - 1) // rows
    segment = torch.repeat_interleave(torch.arange(len(lengths)), per_segment)
    first_tile = per_segment.cumsum(0) - per_segment
    start = ends[segment] - counts[segment] + (torch.arange(segment.numel()) - first_tile[segment]) * rows
    end = torch.minimum(start + rows, ends[segment])
    index = torch.int32 if sum(lengths) < 2**31 else torch.int64
    return tuple(t.to(device=device, dtype=index) for t in (segment, start, end))


def segment_products(
    a: torch.Tensor, b: torch.Tensor, lengths: list[int], a_rows: torch.Tensor | None = None
) -> torch.Tensor:
    """``a``'s consecutive segments (of ``a[a_rows]`` with ``a_rows``), segment ``k`` times ``b[k]`` (any
    strides: a transposed weight is read as it is), in one launch."""
    count = a.shape[0] if a_rows is None else a_rows.numel()
    inner, cols = b.shape[1], b.shape[2]
    out = torch.empty((count, cols), dtype=a.dtype, device=a.device)
    if count == 0 or cols == 0:
        return out
    if inner == 0:
        return out.zero_()
    a = a.contiguous()
    segment, start, end = segment_tiles(lengths, BLOCK_ROWS, a.device)
    block_k, block_c = dot_block(inner, 64), dot_block(cols, 64)
    grid = (segment.numel(), triton.cdiv(cols, block_c))
    _segment_products[grid](
        a, a if a_rows is None else a_rows.contiguous(), b, out, segment, start, end, inner, cols, *b.stride(),
        GATHER=a_rows is not None, BLOCK_R=BLOCK_ROWS, BLOCK_K=block_k, BLOCK_C=block_c,
        PRECISION=_precision(a.dtype), ACC=accumulator(a.dtype),
    )  # fmt: skip
    return out


def segment_weight_gradient(
    a: torch.Tensor,
    grad: torch.Tensor,
    lengths: list[int],
    num_types: int,
    a_rows: torch.Tensor | None = None,
    grad_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per type ``k``, the sum over segment ``k``'s rows of ``a_i^T grad_i`` (of ``a[a_rows]``,
    ``grad[grad_rows]`` where given), (num_types, inner, cols); zero for empty segments."""
    inner, cols = a.shape[1], grad.shape[1]
    wide = torch.float64 if a.dtype == torch.float64 else torch.float32
    out = torch.zeros((num_types, inner, cols), dtype=wide, device=a.device)
    if sum(lengths) and inner and cols:
        segment, start, end = segment_tiles(lengths, CHUNK_ROWS, a.device)
        block_k, block_c = dot_block(inner, 32), dot_block(cols, 32)
        grid = (segment.numel(), triton.cdiv(inner, block_k), triton.cdiv(cols, block_c))
        _segment_weight_gradient[grid](
            a.contiguous(), a if a_rows is None else a_rows.contiguous(), grad.contiguous(),
            grad if grad_rows is None else grad_rows.contiguous(), out, segment, start, end, inner, cols,
            GATHER_A=a_rows is not None, GATHER_G=grad_rows is not None, BLOCK_R=32, BLOCK_K=block_k,
            BLOCK_C=block_c, PRECISION=_precision(a.dtype), ACC=accumulator(a.dtype),
        )  # fmt: skip
    return out.to(a.dtype)
