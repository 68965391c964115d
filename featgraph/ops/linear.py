"""``linear``: ``F.linear`` that skips its input's zeros where the input is mostly zeros; forward, gradients
and shape rule side by side.

Bag-of-words node features (Planetoid's Cora, Citeseer and PubMed; Amazon and Coauthor) are 1-10% nonzero,
and a GNN's first layer multiplies them, after dropout, by its weight every epoch: with Cora's 2,708 x 1,433
features and 64 outputs a dense product is most of featgraph's training epoch. Where a CPU float32/float64
matrix of at least ``MIN_ELEMENTS`` has few enough nonzeros for its output width (``density_limit``: 3% for 16
outputs, 5% for 64), the product and the weight's gradient run over its nonzeros as compressed rows
(``backends.cpu.sparse_rows``): one pass to find them, then a fiftieth of the multiply-adds for Cora. The
result equals the dense product up to summation order; a weight holding inf or NaN (or whose sum overflows),
whose products with zeros the dense product would carry, takes the dense path, and so does the weight's
gradient for an upstream gradient holding inf or NaN. Every other input (dense,
small, on a GPU, 16-bit, not 2-D) runs ``F.linear``. Under autocast it runs in the autocast
dtype, as ``F.linear`` does (``precision``).
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F

from ..backends.cpu import sparse_rows
from ..backends.cpu.sparse_rows import CTYPES, Rows
from ..operator import operator
from . import precision
from .checks import check_tensor

MIN_ELEMENTS = 1 << 16  # below it the dense product costs microseconds
SAMPLE = 1024  # elements an input's density is first estimated from, so a dense input pays no full pass


def density_limit(outputs: int) -> float:
    """The share of nonzeros up to which the compressed path is faster for ``outputs`` outputs, with a margin:
    finding the nonzeros costs about what a dense product of 8 outputs does, and each nonzero then costs about
    16 dense multiply-adds per output (forward and weight gradient, measured on the 2-core Xeon with
    ``featgraph bench sparse-features``), so the compressed path wins below about ``0.12 (1 - 8 / outputs)``;
    half of that leaves room for other CPUs."""
    return max(0.0, 0.06 * (1.0 - 8.0 / outputs))


# forwards' compressed rows for their gradients, by id(x): (a weak reference to x, _key(x), rows)
_kept: dict[int, tuple[weakref.ref, tuple, Rows]] = {}


def _key(x: torch.Tensor) -> tuple:
    return (x.data_ptr(), x._version, tuple(x.shape), x.stride(), x.dtype)


def compressed_rows(x: torch.Tensor, weight: torch.Tensor, keep: bool = False) -> Rows | None:
    """``x``'s nonzeros as compressed rows where the product ``x @ weight.T`` is worth running over them, else
    None. With ``keep`` the result is kept for the gradient, which takes it back (``kept_rows``)."""
    if (
        x.device.type != "cpu" or x.dim() != 2 or x.dtype not in CTYPES or weight.dtype != x.dtype
        or x.numel() < MIN_ELEMENTS or not x.is_contiguous()
    ):  # fmt: skip
        return None
    limit = density_limit(weight.shape[0])
    sample = x.view(-1)[:: max(1, x.numel() // SAMPLE)]
    if int(torch.count_nonzero(sample)) > limit * sample.numel() or not bool(torch.isfinite(weight.sum())):
        return None
    rows = sparse_rows.compress(x, limit)
    if rows is not None and keep:
        for gone in [k for k, (ref, _, _) in _kept.items() if ref() is None]:
            del _kept[gone]  # inputs freed without a backward
        _kept[id(x)] = (weakref.ref(x), _key(x), rows)
    return rows


def kept_rows(x: torch.Tensor, weight: torch.Tensor) -> Rows | None:
    """The rows a forward kept of ``x`` while it is the same, unmodified tensor (as autograd checks its saved
    tensors), else ``compressed_rows``."""
    kept = _kept.pop(id(x), None)
    if kept is not None and kept[0]() is x and kept[1] == _key(x):
        return kept[2]
    return compressed_rows(x, weight)


def _gradient(x, weight, bias, keep, *, outputs, grads, wants) -> list[torch.Tensor | None]:
    (grad,) = grads
    grad_weight = None
    if wants[1]:
        rows = kept_rows(x, weight)
        if rows is None or not bool(torch.isfinite(grad.sum())):  # inf x 0 is NaN: only the dense product has it
            grad_weight = grad.t() @ x
        else:
            grad_weight = sparse_rows.weight_gradient(rows, grad.contiguous(), x.shape[1]).t().contiguous()
    return [grad @ weight if wants[0] else None, grad_weight, grad.sum(0) if wants[2] else None]


@operator(
    "linear", lambda x, weight, bias, keep: x.new_empty((x.shape[0], weight.shape[0])), _gradient,
    autocast=precision.caster("linear"),
)  # fmt: skip
def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, keep: bool) -> torch.Tensor:
    """``x @ weight.T (+ bias)`` for 2-D ``x``, over its nonzeros where it is mostly zeros (kept for the weight's
    gradient with ``keep``)."""
    rows = compressed_rows(x, weight, keep)
    if rows is None:
        return F.linear(x, weight, bias)
    out = sparse_rows.product(rows, weight.t().contiguous())
    return out if bias is None else out.add_(bias)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)``: ``x`` (..., in), ``weight`` (out, in), ``bias`` (out). A 2-D ``x`` goes
    through ``featgraph::linear``, which skips its zeros where it is mostly zeros (see the module's docstring);
    batched ``x`` takes ``F.linear``."""
    check_tensor("x", x)
    check_tensor("weight", weight, dims=2, device=x.device)
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x: expected {weight.shape[1]} features in its last dimension (weight is "
                         f"{tuple(weight.shape)}), got shape {tuple(x.shape)}")  # fmt: skip
    if bias is not None:
        check_tensor("bias", bias, dims=1, rows=weight.shape[0], rows_are="weight's outputs", device=x.device)
    args = precision.autocast_inputs("linear", x, weight, bias)
    for name, t in zip(("weight", "bias"), args[1:], strict=True):
        if t is not None and t.dtype != args[0].dtype:
            raise TypeError(f"{name}: expected x's dtype {args[0].dtype}, got {t.dtype}")
    if x.dim() != 2:
        return F.linear(*args)
    return _linear(*args, torch.is_grad_enabled() and args[1].requires_grad)
