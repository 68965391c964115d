"""``linear_sum``: two Linears of the same rows summed into one output, ``a W_a^T + b W_b^T + bias``, as
GraphSAGE (``lin_l(aggr) + lin_r(x)``) and GraphConv (``lin_rel(aggr) + lin_root(x)``) end.

Written as two Linears and an add, eager torch makes three N x out tensors, and Inductor turns the add into an
``addmm`` whose input, the first product, is first copied into its output (GraphSAGE on email-Enron: compiled
1.14x eager's epoch). Here the second product accumulates into the first in place, one N x out tensor; the
``featgraph::linear_sum`` operator keeps that whole under ``torch.compile``. Under autocast it runs in the
autocast dtype, as ``F.linear`` does (``precision``).
"""

from __future__ import annotations

import torch

from ..operator import operator
from . import precision


def _gradient(a, weight_a, b, weight_b, bias, *, outputs, grads, wants) -> list[torch.Tensor | None]:
    (grad,) = grads
    return [
        grad @ weight_a if wants[0] else None,
        grad.t() @ a if wants[1] else None,
        grad @ weight_b if wants[2] else None,
        grad.t() @ b if wants[3] else None,
        grad.sum(0) if wants[4] else None,
    ]


@operator(
    "linear_sum", lambda a, weight_a, b, weight_b, bias: a.new_empty((a.shape[0], weight_a.shape[0])), _gradient,
    autocast=precision.caster("linear_sum"),
)  # fmt: skip
def _linear_sum(
    a: torch.Tensor, weight_a: torch.Tensor, b: torch.Tensor, weight_b: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """``a @ weight_a.T + b @ weight_b.T (+ bias)`` in one buffer."""
    out = torch.mm(a, weight_a.t()) if bias is None else torch.addmm(bias, a, weight_a.t())
    return out.addmm_(b, weight_b.t())


def linear_sum(a: torch.Tensor, lin_a: torch.nn.Module, b: torch.Tensor, lin_b: torch.nn.Module) -> torch.Tensor:
    """``lin_a(a) + lin_b(b)`` for two bias-optional ``Linear``s (PyG's or torch's: ``weight`` and ``bias``) over
    the same rows, without the intermediate products. ``a`` and ``b`` are (rows, in) matrices."""
    for name, x, lin in (("a", a, lin_a), ("b", b, lin_b)):
        if x.dim() != 2 or x.shape[1] != lin.weight.shape[1]:
            raise ValueError(f"{name}: expected (rows, {lin.weight.shape[1]}), got {tuple(x.shape)}")
    if a.shape[0] != b.shape[0] or lin_a.weight.shape[0] != lin_b.weight.shape[0]:
        raise ValueError(
            f"linear_sum: a gives {a.shape[0]} x {lin_a.weight.shape[0]} and b {b.shape[0]} x "
            f"{lin_b.weight.shape[0]}: both must have the same rows and outputs"
        )
    if lin_b.bias is not None:
        return lin_a(a) + lin_b(b)  # two biases: not the shape this op takes (PyG's lin_r/lin_root have none)
    args = precision.autocast_inputs("linear_sum", a, lin_a.weight, b, lin_b.weight, lin_a.bias)
    if len({x.dtype for x in args if x is not None}) > 1:
        return lin_a(a) + lin_b(b)  # mixed dtypes outside autocast: torch's rules and errors
    return _linear_sum(*args)
