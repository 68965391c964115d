"""DGL's binary message ops: forward expression and the gradient expression for each operand, side by side.

Operands are named ``a`` (lhs), ``b`` (rhs) and ``g`` (the incoming gradient); each rule lists the operands
it reads, so a kernel only binds what it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..graph import Graph
from ..te.expr import Expr
from . import lowering

Rule = tuple[tuple[str, ...], Callable[..., Expr]]


@dataclass(frozen=True)
class BinaryOp:
    forward: Rule
    grad_lhs: Rule | None
    grad_rhs: Rule | None
    reduce_last: bool = False  # dot: sum over the last feature dimension


BINARY_OPS: dict[str, BinaryOp] = {
    "add": BinaryOp((("a", "b"), lambda a, b: a + b), (("g",), lambda g: g), (("g",), lambda g: g)),
    "sub": BinaryOp((("a", "b"), lambda a, b: a - b), (("g",), lambda g: g), (("g",), lambda g: -g)),
    "mul": BinaryOp(
        (("a", "b"), lambda a, b: a * b), (("g", "b"), lambda g, b: g * b), (("g", "a"), lambda g, a: g * a)
    ),
    "div": BinaryOp(
        (("a", "b"), lambda a, b: a / b),
        (("g", "b"), lambda g, b: g / b),
        (("g", "a", "b"), lambda g, a, b: -g * a / (b * b)),
    ),
    "copy_lhs": BinaryOp((("a",), lambda a: a), (("g",), lambda g: g), None),
    "copy_rhs": BinaryOp((("b",), lambda b: b), None, (("g",), lambda g: g)),
    "dot": BinaryOp(
        (("a", "b"), lambda a, b: a * b), (("g", "b"), lambda g, b: g * b), (("g", "a"), lambda g, a: g * a), True
    ),
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


def gradients(
    g: Graph, op: str, key: str, roles: dict[str, tuple[str, str, torch.Tensor]], wants: list[bool], **options
) -> list[torch.Tensor | None]:
    """The gradients of (lhs, rhs) where ``wants``, each one kernel (``lowering.run``, with ``options``) by the
    op's rules. ``roles`` binds the operands ``a`` (lhs), ``b`` (rhs) and ``g`` (the output's gradient) as
    (placeholder, target, tensor): each gradient lands where its operand lives."""
    rule = BINARY_OPS[op]
    grads: list[torch.Tensor | None] = []
    for name, grad_rule, want in (("a", rule.grad_lhs, wants[0]), ("b", rule.grad_rhs, wants[1])):
        _, target, x = roles[name]
        if not want or grad_rule is None:
            grads.append(None)
            continue
        names, fn = grad_rule
        grad = lowering.run(
            g, target, [roles[n] for n in names], lambda loads, fn=fn: fn(*loads), f"{key}-d{name}",
            result=features(x), **options,
        )  # fmt: skip
        grads.append(grad.view_as(x))
    return grads


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
