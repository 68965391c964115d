"""``gsddmm``: op(data at one end or edge, data at another) for every edge, with gradients.

Forward: an SDDMM. Gradients: the kernel's own, derived from the op's UDF (``templates.gradients``), each
landing where its operand lives: per edge an SDDMM, per destination an SpMM over in-edges, per source an
SpMM over out-edges (the reversed graph).
"""

from __future__ import annotations

import torch

from ..graph import Graph
from ..graph.graph import GraphRef
from ..operator import fake_edges, operator
from . import binary, precision
from .checks import check_graph

SDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
TARGETS = ("u", "v", "e")


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
    return given.new_empty(binary.out_shape(fake_edges(ref), op, lhs, rhs))


def _gradient(
    g: Graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str, tune: bool, *, outputs, grads, wants
) -> list[torch.Tensor | None]:
    """The gradients of (lhs, rhs): the forward kernel's own, derived from the op's UDF (``templates.gradients``)."""
    kernel, tensors = binary.kernel(g, "e", op, lhs_target, rhs_target, lhs, rhs, tune=tune)
    return binary.kernel_gradients(kernel, tensors, grads[0], None, lhs, rhs, wants)


@operator("gsddmm", _fake, _gradient, autocast=precision.caster("gsddmm"))
def _gsddmm(
    g: Graph, op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None, lhs_target: str, rhs_target: str,
    tune: bool,
) -> torch.Tensor:  # fmt: skip
    """``gsddmm`` with its operands checked: one SDDMM."""
    kernel, tensors = binary.kernel(g, "e", op, lhs_target, rhs_target, lhs, rhs, tune=tune)
    out = kernel.evaluate(tensors, want_arg=False)[0]
    return out.squeeze(-1) if binary.scalar_features(lhs, rhs) else out
