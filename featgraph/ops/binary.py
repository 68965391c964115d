"""DGL's binary message ops: each op's expression, the shape rule of ``gspmm`` and ``gsddmm``, and their
gradients, which the ops' kernels derive from the expression (``templates.gradients``).

Operands are named ``a`` (lhs) and ``b`` (rhs); each op lists the operands it reads, so a kernel only binds
what it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..graph import Graph
from ..te.expr import Expr
from ..templates.gradients import placeholder_gradients
from ..templates.kernel import Kernel
from . import lowering

Rule = tuple[tuple[str, ...], Callable[..., Expr]]


@dataclass(frozen=True)
class BinaryOp:
    forward: Rule
    reduce_last: bool = False  # dot: sum over the last feature dimension


BINARY_OPS: dict[str, BinaryOp] = {
    "add": BinaryOp((("a", "b"), lambda a, b: a + b)),
    "sub": BinaryOp((("a", "b"), lambda a, b: a - b)),
    "mul": BinaryOp((("a", "b"), lambda a, b: a * b)),
    "div": BinaryOp((("a", "b"), lambda a, b: a / b)),
    "copy_lhs": BinaryOp((("a",), lambda a: a)),
    "copy_rhs": BinaryOp((("b",), lambda b: b)),
    "dot": BinaryOp((("a", "b"), lambda a, b: a * b), reduce_last=True),
}


def features(x: torch.Tensor) -> tuple[int, ...]:
    """A tensor's feature shape: its dimensions after the rows, (1,) for one value per row."""
    return tuple(x.shape[1:]) or (1,)


def scalar_features(*operands: torch.Tensor | None) -> bool:
    """DGL's scalar features: every operand given is 1-D (one value per row), so the result is 1-D too."""
    return all(x.dim() == 1 for x in operands if x is not None)


def out_shape(rows: int, op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None) -> tuple[int, ...]:
    """The shape rule of ``gspmm`` and ``gsddmm``: (rows, *broadcast(lhs features, rhs features)), the last
    dimension 1 for ``dot``; (rows,) for scalar features."""
    if scalar_features(lhs, rhs):
        return (rows,)
    full = torch.broadcast_shapes(*[features(x) for x in (lhs, rhs) if x is not None])
    return (rows, *full[:-1], 1) if op == "dot" else (rows, *full)


def kernel(
    g: Graph, target: str, op: str, lhs_target: str, rhs_target: str, lhs, rhs, reducer: str = "sum", **options
) -> tuple[Kernel, dict[str, torch.Tensor]]:
    """``op``'s kernel for every element of ``target`` ("v": ``gspmm``'s SpMM, "e": ``gsddmm``'s SDDMM), with
    lhs and rhs at their targets, and its tensors by placeholder (``lowering.bind``, ``options`` its own). The
    placeholders bear the arguments' names, which the errors about them then quote."""
    rule = BINARY_OPS[op]
    names, fn = rule.forward
    roles = {"a": ("lhs", lhs_target, lhs), "b": ("rhs", rhs_target, rhs)}
    key = f"{'gspmm' if target == 'v' else 'gsddmm'}-{op}"
    return lowering.bind(
        g, target, [roles[n] for n in names], lambda loads: fn(*loads), key, reducer, rule.reduce_last, **options
    )


def kernel_gradients(
    kernel: Kernel, tensors: dict[str, torch.Tensor], grad: torch.Tensor, arg: torch.Tensor | None, lhs, rhs,
    wants: list[bool],
) -> list[torch.Tensor | None]:  # fmt: skip
    """The gradients of (lhs, rhs) where ``wants``: the op's kernel's own (``templates.gradients``), from the
    output's gradient ``grad`` and, for max/min, the winners ``arg`` the forward kept."""
    grad = grad.unsqueeze(-1) if scalar_features(lhs, rhs) else grad
    wanted = [name for name, want in zip(("lhs", "rhs"), wants, strict=True) if want and name in tensors]
    by_name = placeholder_gradients(kernel, tensors, grad, arg, None, wanted)
    return [by_name[n].view_as(x) if n in by_name else None for n, x in (("lhs", lhs), ("rhs", rhs))]


def get(op: str, allowed: tuple[str, ...]) -> BinaryOp:
    if op not in allowed:
        raise ValueError(f"op must be one of {allowed}, got {op!r}")
    return BINARY_OPS[op]


def operands(op: str, rule: BinaryOp, lhs, rhs, device: torch.device) -> tuple:
    """(lhs, rhs) as the op reads them: None where it ignores one, an error where it needs a missing one or
    gets something other than a tensor on the graph's ``device``."""
    reads = rule.forward[0]
    for name, x, side in (("a", lhs, "lhs"), ("b", rhs, "rhs")):
        if name in reads and x is None:
            raise ValueError(f"op {op!r} needs {side}")
        if name in reads and not isinstance(x, torch.Tensor):
            raise TypeError(f"{side}: expected a torch.Tensor, got {type(x).__name__}")
        if name in reads and x.device != device:
            raise ValueError(f"{side}: the graph is on {device}, got a tensor on {x.device}")
    return (lhs if "a" in reads else None), (rhs if "b" in reads else None)
