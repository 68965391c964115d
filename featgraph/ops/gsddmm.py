"""``gsddmm``: op(data at one end or edge, data at another) for every edge, with gradients.

Forward: an SDDMM. The gradient of an operand lives where the operand lives: per edge an SDDMM, per
destination an SpMM over in-edges, per source an SpMM over out-edges (the reversed graph).
"""

from __future__ import annotations

import torch

from ..graph import Graph
from ..graph.graph import GraphRef
from ..operator import fake_edges, operator
from . import binary, lowering, precision
from .checks import check_graph
from .gspmm import _features, scalar_features

SDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
TARGETS = ("u", "v", "e")


def out_shape(num_edges: int, op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None) -> tuple[int, ...]:
    """Shape rule: (num_edges, *broadcast features), the last dimension 1 for ``dot``; (num_edges,) for
    scalar features."""
    if scalar_features(lhs, rhs):
        return (num_edges,)
    full = torch.broadcast_shapes(*[_features(x) for x in (lhs, rhs) if x is not None])
    return (num_edges, *full[:-1], 1) if op == "dot" else (num_edges, *full)


def gsddmm(
    g: Graph | GraphRef,
    op: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    lhs_target: str = "u",
    rhs_target: str = "v",
    tune: bool = False,
) -> torch.Tensor:
    """DGL's ``gsddmm``: ``out[e] = op(lhs[lhs_target(e)], rhs[rhs_target(e)])`` with targets u (source),
    v (destination), e (edge); ``dot`` sums the last feature dimension and keeps it as size 1. 1-D operands
    are one feature per row, and the result is 1-D when every operand the op reads is (as DGL). ``tune=True``
    tunes the forward and gradient kernels on first use (``featgraph.tuning``)."""
    check_graph(g)
    rule = binary.get(op, SDDMM_OPS)
    for target in (lhs_target, rhs_target):
        if target not in TARGETS:
            raise ValueError(f"targets must be in {TARGETS}, got {target!r}")
    lhs, rhs = binary.operands(op, rule, *precision.autocast_inputs("gsddmm", lhs, rhs), g.device)
    return _gsddmm(g, op, lhs, rhs, lhs_target, rhs_target, tune)


def _fake(ref: GraphRef, op: str, lhs, rhs, lhs_target: str, rhs_target: str, tune: bool) -> torch.Tensor:
    given = next(x for x in (lhs, rhs) if x is not None)
    return given.new_empty(out_shape(fake_edges(ref), op, lhs, rhs))


def _gradient(
    g: Graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str, tune: bool, *, outputs, grads, wants
) -> list[torch.Tensor | None]:
    grad = grads[0].unsqueeze(-1) if scalar_features(lhs, rhs) else grads[0]
    return list(gradients(g, op, lhs, rhs, lhs_target, rhs_target, grad, tuple(wants), tune))


@operator("gsddmm", _fake, _gradient, autocast=precision.caster("gsddmm"))
def _gsddmm(
    g: Graph, op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None, lhs_target: str, rhs_target: str,
    tune: bool,
) -> torch.Tensor:  # fmt: skip
    """``gsddmm`` with its operands checked."""
    out = forward(g, op, lhs, rhs, lhs_target, rhs_target, tune)
    return out.squeeze(-1) if scalar_features(lhs, rhs) else out


def forward(g: Graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str, tune: bool = False) -> torch.Tensor:
    """The forward kernel of ``op`` (no autograd of its own)."""
    rule = binary.BINARY_OPS[op]
    names, fn = rule.forward
    roles = {"a": ("lhs", lhs_target, lhs), "b": ("rhs", rhs_target, rhs)}
    return lowering.run(
        g, "e", [roles[n] for n in names], lambda loads: fn(*loads), f"gsddmm-{op}", reduce_last=rule.reduce_last,
        tune=tune,
    )  # fmt: skip


def gradients(
    g: Graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str, grad_out: torch.Tensor, wants: tuple[bool, bool],
    tune: bool = False,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """The gradients of (lhs, rhs) where ``wants``, each a kernel by the rules of ``binary``."""
    rule = binary.BINARY_OPS[op]
    roles = {"a": ("lhs", lhs_target, lhs), "b": ("rhs", rhs_target, rhs), "g": ("g", "e", grad_out.contiguous())}
    grads: dict[str, torch.Tensor | None] = {"a": None, "b": None}
    for name, x, target, grad_rule, want in (
        ("a", lhs, lhs_target, rule.grad_lhs, wants[0]),
        ("b", rhs, rhs_target, rule.grad_rhs, wants[1]),
    ):
        if want and grad_rule is not None:
            names, fn = grad_rule
            grad = lowering.run(
                g, target, [roles[n] for n in names], lambda loads, fn=fn: fn(*loads), f"gsddmm-{op}-d{name}",
                result=_features(x), tune=tune,
            )  # fmt: skip
            grads[name] = grad.view_as(x)
    return grads["a"], grads["b"]
