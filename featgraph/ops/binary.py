"""DGL's binary message ops: forward expression and the gradient expression for each operand, side by side.

Operands are named ``a`` (lhs), ``b`` (rhs) and ``g`` (the incoming gradient); each rule lists the operands
it reads, so a kernel only binds what it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..te.expr import Expr

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
