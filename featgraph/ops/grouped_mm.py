"""Grouped matrix products on the sorted-by-type layout of a typed graph: ``segment_mm`` (DGL: consecutive row
segments of ``a``, segment ``k`` times ``b[k]``), PyG's ``segment_matmul`` (the same with offsets ``ptr``) and
``gather_mm`` (DGL: row ``i`` of ``a`` times ``b[idx_b[i]]``).

A relation's rows are one contiguous block, so each segment is one dense ``torch.mm`` into its slice of the
output: no per-row weight (an ``[N, in, out]`` tensor, as ``torch.bmm(a, b[idx])`` builds) ever exists. The
gradients are grouped products too: ``da`` by the transposed weights, ``db[k]`` as ``a_k^T grad_k``.
``gather_mm`` sorts the rows by type once (stable) and runs the segment products on the sorted rows.
"""

from __future__ import annotations

import torch

from ..backends import gpu
from ..operator import operator
from ..templates.kernel import device_target
from .udfs import TORCH_TO_TE

GROUPED_SEGMENTS = 16  # from this many segments a grouped launch on the GPU, whatever their widths
GROUPED_WIDTH = 128  # products at most this wide (in and out) take the grouped launch from two segments


def _check_operands(a: torch.Tensor, b: torch.Tensor) -> None:
    for name, x, dims in (("a", a, 2), ("b", b, 3)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
        if x.dtype not in TORCH_TO_TE:
            raise TypeError(f"{name}: expected a floating tensor, got {x.dtype}")
        if x.dim() != dims:
            raise ValueError(f"{name}: expected {dims} dimensions, got shape {tuple(x.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"b: expected {a.dtype} like a, got {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"b: expected a tensor on {a.device} like a, got one on {b.device}")
    if a.shape[1] != b.shape[1]:
        shape = tuple(b.shape)
        raise ValueError(f"b: a has {a.shape[1]} columns, so b must be (types, {a.shape[1]}, out), got {shape}")


def _integer_vector(name: str, x: torch.Tensor, length: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 1 or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"{name}: expected a 1-D integer tensor, got {x.dtype} of shape {tuple(x.shape)}")
    if length is not None and x.numel() != length:
        raise ValueError(f"{name}: expected {length} entries, got {x.numel()}")
    return x


def _segment(a: torch.Tensor, rows: torch.Tensor | None, start: int, stop: int) -> torch.Tensor:
    """Rows ``start:stop`` of ``a``, or with ``rows`` the rows of ``a`` that ``rows[start:stop]`` name: a
    segment's gather alone, never the whole gathered matrix."""
    return a[start:stop] if rows is None else a.index_select(0, rows[start:stop])


def grouped_on_gpu(a: torch.Tensor, lengths: list[int], inner: int, cols: int, block_diagonal: bool = False) -> bool:
    """Whether the segment products run as one grouped launch (``backends.gpu.grouped_mm``): on the GPU
    target, for a weight per segment that is not block-diagonal (a 4-D ``b`` keeps its ``torch.bmm``), with
    several segments, and either many of them (``GROUPED_SEGMENTS``: a launch
    per relation costs more than its product) or narrow products (``GROUPED_WIDTH``: at those widths the
    tiles are as fast as a library GEMM), where few wide segments keep ``torch.mm``."""
    if block_diagonal or len(lengths) < 2 or device_target(a.device) != "gpu":
        return False
    gpu.check_device(a.device)
    return len(lengths) >= GROUPED_SEGMENTS or max(inner, cols) <= GROUPED_WIDTH


def segment_products(
    a: torch.Tensor, b: torch.Tensor, lengths: list[int], a_rows: torch.Tensor | None = None
) -> torch.Tensor:
    """``a``'s consecutive segments of ``lengths`` rows, segment ``k`` times ``b[k]``, each one ``torch.mm``
    into its slice of the output (on the GPU one grouped launch, ``grouped_on_gpu``). ``a_rows``: the segments
    are of ``a[a_rows]``, gathered a segment at a time (R-GCN's pairs read their vertices' rows so, holding one
    relation's rows at once rather than all). A 4-D ``b`` (types, blocks, rows, columns) is block-diagonal:
    column block ``j`` of the result is ``a``'s column block ``j`` times ``b[k, j]`` (one ``torch.bmm`` per
    segment)."""
    if grouped_on_gpu(a, lengths, b.shape[-2], b.shape[-1], block_diagonal=b.dim() == 4):
        from ..backends.gpu.grouped_mm import segment_products as grouped  # imports triton: the GPU's alone

        return grouped(a, b, lengths, a_rows)
    count = a.shape[0] if a_rows is None else a_rows.numel()
    if b.dim() == 4:
        blocks, rows_in, cols = b.shape[1:]
        out = a.new_empty((count, blocks * cols))
        start = 0
        for k, rows in enumerate(lengths):
            if rows:
                segment = _segment(a, a_rows, start, start + rows).view(rows, blocks, rows_in)
                part = torch.bmm(segment.transpose(0, 1), b[k])
                out[start : start + rows].view(rows, blocks, cols).copy_(part.transpose(0, 1))
            start += rows
        return out
    out = a.new_empty((count, b.shape[2]))
    start = 0
    for k, rows in enumerate(lengths):
        if rows:
            torch.mm(_segment(a, a_rows, start, start + rows), b[k], out=out[start : start + rows])
        start += rows
    return out


def segment_weight_gradient(
    a: torch.Tensor,
    grad: torch.Tensor,
    lengths: list[int],
    num_types: int,
    blocks: int | None = None,
    a_rows: torch.Tensor | None = None,
    grad_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """``sum over segment k's rows of a_i^T grad_i`` per type (zero for empty segments): ``b``'s gradient; with
    ``blocks``, only the diagonal blocks (a 4-D ``b``'s gradient). ``a_rows``, ``grad_rows``: the segments are
    of ``a[a_rows]`` (``grad[grad_rows]``), gathered a segment at a time. On the GPU one grouped launch
    (``grouped_on_gpu``)."""
    if grouped_on_gpu(a, lengths, a.shape[1], grad.shape[1], block_diagonal=blocks is not None):
        from ..backends.gpu.grouped_mm import segment_weight_gradient as grouped

        return grouped(a, grad, lengths, num_types, a_rows, grad_rows)
    if blocks is not None:
        rows_in, cols = a.shape[1] // blocks, grad.shape[1] // blocks
        out = a.new_zeros((num_types, blocks, rows_in, cols))
        start = 0
        for k, rows in enumerate(lengths):
            if rows:
                left = _segment(a, a_rows, start, start + rows).view(rows, blocks, rows_in).permute(1, 2, 0)
                right = _segment(grad, grad_rows, start, start + rows).view(rows, blocks, cols).transpose(0, 1)
                torch.bmm(left, right, out=out[k])
            start += rows
        return out
    out = a.new_zeros((num_types, a.shape[1], grad.shape[1]))
    start = 0
    for k, rows in enumerate(lengths):
        if rows:
            left, right = _segment(a, a_rows, start, start + rows), _segment(grad, grad_rows, start, start + rows)
            torch.mm(left.t(), right, out=out[k])
        start += rows
    return out


def _segment_gradient(a, b, seglen_a, *, outputs, grads, wants) -> list[torch.Tensor | None]:
    lengths = seglen_a.tolist()
    (grad,) = grads
    return [
        segment_products(grad, b.transpose(1, 2), lengths) if wants[0] else None,
        segment_weight_gradient(a, grad, lengths, b.shape[0]) if wants[1] else None,
        None,
    ]


@operator("segment_mm", lambda a, b, seglen_a: a.new_empty((a.shape[0], b.shape[2])), _segment_gradient)
def _segment_mm(a: torch.Tensor, b: torch.Tensor, seglen_a: torch.Tensor) -> torch.Tensor:
    """``segment_mm`` with its arguments checked."""
    return segment_products(a, b, seglen_a.tolist())


def segment_mm(a: torch.Tensor, b: torch.Tensor, seglen_a: torch.Tensor) -> torch.Tensor:
    """DGL's ``segment_mm``: ``a`` (N, D1) in ``len(seglen_a)`` consecutive segments, segment ``k``
    (``seglen_a[k]`` rows) times ``b[k]`` (D1, D2); the result is (N, D2). Differentiable in ``a`` and ``b``."""
    _check_operands(a, b)
    seglen_a = _integer_vector("seglen_a", torch.as_tensor(seglen_a), b.shape[0])
    if seglen_a.numel() and int(seglen_a.min()) < 0:
        raise ValueError(f"seglen_a: segment lengths must be non-negative, got {int(seglen_a.min())}")
    if int(seglen_a.sum()) != a.shape[0]:
        raise ValueError(f"seglen_a: sums to {int(seglen_a.sum())}, but a has {a.shape[0]} rows")
    return _segment_mm(a, b, seglen_a.to("cpu", torch.int64))


def segment_matmul(inputs: torch.Tensor, ptr: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """PyG's (pyg-lib's) ``segment_matmul``: rows ``ptr[k]:ptr[k + 1]`` of ``inputs`` times ``other[k]``."""
    ptr = _integer_vector("ptr", torch.as_tensor(ptr))
    if ptr.numel() != other.shape[0] + 1 or int(ptr[0]) != 0 or int(ptr[-1]) != inputs.shape[0]:
        raise ValueError(
            f"ptr: expected {other.shape[0] + 1} offsets from 0 to {inputs.shape[0]} (inputs' rows), got "
            f"{ptr.tolist() if ptr.numel() <= 8 else tuple(ptr.shape)}"
        )
    if bool((ptr[1:] < ptr[:-1]).any()):
        raise ValueError("ptr: offsets must not decrease")
    return segment_mm(inputs, other, ptr[1:] - ptr[:-1])


def _sorted(idx_b: torch.Tensor, num_types: int) -> tuple[torch.Tensor, list[int]]:
    """The rows in type order (stable) and each type's row count."""
    order = torch.sort(idx_b, stable=True).indices
    return order, torch.bincount(idx_b, minlength=num_types).tolist()


def _gathered(a: torch.Tensor, b: torch.Tensor, idx_b: torch.Tensor) -> torch.Tensor:
    order, lengths = _sorted(idx_b, b.shape[0])
    out = torch.empty((a.shape[0], b.shape[2]), dtype=a.dtype, device=a.device)
    out[order] = segment_products(a[order], b, lengths)
    return out


def _gather_gradient(a, b, idx_b, *, outputs, grads, wants) -> list[torch.Tensor | None]:
    (grad,) = grads
    grad_a = _gathered(grad, b.transpose(1, 2), idx_b) if wants[0] else None
    grad_b = None
    if wants[1]:
        order, lengths = _sorted(idx_b, b.shape[0])
        grad_b = segment_weight_gradient(a[order], grad[order], lengths, b.shape[0])
    return [grad_a, grad_b, None]


@operator("gather_mm", lambda a, b, idx_b: a.new_empty((a.shape[0], b.shape[2])), _gather_gradient)
def _gather_mm(a: torch.Tensor, b: torch.Tensor, idx_b: torch.Tensor) -> torch.Tensor:
    """``gather_mm`` with its arguments checked, but for the values of ``idx_b``: checked here, where they are
    known (compiled code traces the call without them)."""
    if idx_b.numel() and (int(idx_b.min()) < 0 or int(idx_b.max()) >= b.shape[0]):
        raise IndexError(
            f"idx_b: type ids must lie in [0, {b.shape[0]}) (b's first dimension), got "
            f"[{int(idx_b.min())}, {int(idx_b.max())}]"
        )
    return _gathered(a, b, idx_b)


def gather_mm(a: torch.Tensor, b: torch.Tensor, idx_b: torch.Tensor) -> torch.Tensor:
    """DGL's ``gather_mm``: ``out[i] = a[i] @ b[idx_b[i]]`` for ``a`` (N, D1), ``b`` (types, D1, D2) and a type
    id per row, without the (N, D1, D2) tensor ``b[idx_b]`` would be. Differentiable in ``a`` and ``b``."""
    _check_operands(a, b)
    idx_b = _integer_vector("idx_b", torch.as_tensor(idx_b, device=a.device), a.shape[0]).to(torch.int64)
    return _gather_mm(a, b, idx_b)
