"""Builtin binary ops as UDFs of the expression language, with NumPy broadcasting of feature shapes.

Every builtin op (and each of its gradients) is one ``te.compute`` over the broadcast feature shape; where
the wanted result is smaller than the broadcast shape (a gradient for a broadcast operand), the extra
dimensions become reduce axes inside the same UDF, so nothing of size E x broadcast shape is materialised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .. import te
from ..te.expr import Expr, Placeholder, Var

TORCH_TO_TE = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64"}
TARGET_VAR = {"u": "src", "v": "dst", "e": "eid"}


@dataclass(frozen=True)
class Operand:
    """A tensor read by a UDF: which graph variable indexes its rows, and its feature shape."""

    name: str
    target: str  # "u", "v" or "e"
    rows: int
    features: tuple[int, ...]
    dtype: str

    @property
    def row_free(self) -> tuple:
        """Everything of the operand a UDF reads but its rows, which each graph decides."""
        return (self.name, self.target, self.features, self.dtype)

    def placeholder(self) -> Placeholder:
        """Its placeholder, one row per vertex or edge of whichever graph binds it (no row count)."""
        return te.placeholder((None, *self.features), dtype=self.dtype, name=self.name)


def operand(name: str, target: str, tensor: torch.Tensor) -> Operand:
    if tensor.dtype not in TORCH_TO_TE:
        raise TypeError(f"{name}: expected a floating tensor, got {tensor.dtype}")
    if tensor.dim() < 1:
        raise ValueError(f"{name}: expected at least one dimension (rows), got a scalar")
    return Operand(name, target, tensor.shape[0], tuple(tensor.shape[1:]) or (1,), TORCH_TO_TE[tensor.dtype])


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy's broadcast of feature shapes (plain Python: ``torch.broadcast_shapes`` costs tens of
    microseconds a call, which every op call paid)."""
    full: list[int] = [1] * max(len(s) for s in shapes)
    for shape in shapes:
        for k, extent in enumerate(shape, len(full) - len(shape)):
            if extent != 1 and full[k] not in (1, extent):
                raise ValueError(f"feature shapes {[tuple(s) for s in shapes]} do not broadcast")
            full[k] = extent if extent != 1 else full[k]
    return tuple(full)


def _load(p: Placeholder, op: Operand, row: Var, index: Sequence[Expr], full: Sequence[int]) -> Expr:
    """``p[row, ...]`` at the broadcast position ``index`` (size-1 dims read element 0)."""
    offset = len(full) - len(op.features)
    feature_index = [te.Const(0) if op.features[k] == 1 else index[offset + k] for k in range(len(op.features))]
    return p[(row, *feature_index)]


Combine = Callable[[list[Expr]], Expr]


def udf_shapes(operands: Sequence[Operand], reduce_last: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``elementwise_udf``'s broadcast shape and output feature shape, without building the UDF."""
    full = broadcast(*[o.features for o in operands])
    return full, (*full[:-1], 1) if reduce_last else full


def elementwise_udf(
    operands: Sequence[Operand], combine: Combine, reduce_last: bool = False
) -> tuple[Callable, tuple[int, ...]]:
    """A UDF computing ``combine(loads)`` at every broadcast position, and its output feature shape;
    ``reduce_last`` sums over the last broadcast dimension and keeps it as size 1 (DGL's ``dot``)."""
    full, out = udf_shapes(operands, reduce_last)
    reduce_dims = [len(full) - 1] if reduce_last and full[-1] > 1 else []
    placeholders = {o.name: o.placeholder() for o in operands}

    def udf(src: Var, dst: Var, eid: Var):
        rows = {"u": src, "v": dst, "e": eid}
        axes = {p: te.reduce_axis((0, full[p]), name=f"r{p}") for p in reduce_dims}

        def body(*out_index: Var) -> Expr:
            position = [axes[p] if p in axes else out_index[p] for p in range(len(full))]
            value = combine([_load(placeholders[o.name], o, rows[o.target], position, full) for o in operands])
            return te.sum(value, axis=tuple(axes.values())) if axes else value

        return te.compute(out, body)

    return udf, out
