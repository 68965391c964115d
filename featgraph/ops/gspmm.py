"""``gspmm``: reduce op(source data, edge data) over each vertex's in-edges, with gradients.

Forward: an SpMM with the op inlined. Gradients: the kernel's own, derived from the op's UDF
(``templates.gradients``): of the source data an SpMM over the reversed graph, of the edge data an SDDMM. For
max/min only the winning edge of each output element receives gradient: the gradient kernels visit the
n x features winners the forward kept (``templates.winner``), never E x features.
"""

from __future__ import annotations

import torch

from ..graph import Graph
from ..graph.graph import GraphRef
from ..operator import operator
from . import binary, precision
from .checks import check_graph

SPMM_OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")
REDUCERS = ("sum", "mean", "max", "min")


def gspmm(
    g: Graph | GraphRef,
    op: str,
    reduce: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    strategy: str = "gar",
    tune: bool = False,
) -> torch.Tensor:
    """DGL's ``gspmm``: ``out[v] = reduce_{e = (u -> v)} op(lhs[u], rhs[e])``.

    ``op`` in add, sub, mul, div, copy_lhs, copy_rhs; ``reduce`` in sum, mean, max, min (vertices without
    in-edges get 0; max/min as torch.amax otherwise: NaN propagates, all -inf gives -inf, and the gradient
    goes to one winning edge, see ``templates.winner``). Feature shapes broadcast as in NumPy, e.g. lhs
    (n, h, d) with rhs (E, h, 1); 1-D operands are one feature per row, and the result is 1-D when every
    operand the op reads is (as DGL).
    ``strategy``: "gar" (default: vertex-centric over the CSR, deterministic), "gas" (edge-centric with
    atomics: no CSR needed, sum/mean only, NOT deterministic in the last bits) or "auto" (opt-in, see
    ``lowering.choose_strategy``: GAS only for messages of width <= 2 on a graph without a CSR yet).
    ``tune=True`` tunes the forward and gradient kernels for this graph and shape on first use
    (``featgraph.tuning``; results cached on disk).
    """
    check_graph(g)
    rule = binary.get(op, SPMM_OPS)
    if reduce not in REDUCERS:
        raise ValueError(f"reduce must be one of {REDUCERS}, got {reduce!r}")
    lhs, rhs = binary.operands(op, rule, *precision.autocast_inputs("gspmm", lhs, rhs), g.device)
    return _gspmm(g, op, reduce, lhs, rhs, strategy, tune)[0]


def _fake(ref: GraphRef, op: str, reduce: str, lhs, rhs, strategy: str, tune: bool):
    given = next(x for x in (lhs, rhs) if x is not None)
    shape = binary.out_shape(ref.num_dst_nodes, op, lhs, rhs)
    winners = (ref.num_dst_nodes, *(binary.features(given) if binary.scalar_features(lhs, rhs) else shape[1:]))
    return given.new_empty(shape), given.new_empty(winners if reduce in ("max", "min") else (0,), dtype=torch.int64)


def _gradient(
    g: Graph, op: str, reduce: str, lhs, rhs, strategy: str, tune: bool, *, outputs, grads, wants
) -> list[torch.Tensor | None]:
    """The gradients of (lhs, rhs): the forward kernel's own, derived from the op's UDF (``templates.gradients``;
    for max/min through the winners the forward kept)."""
    kernel, tensors = binary.kernel(g, "v", op, "u", "e", lhs, rhs, reduce, strategy=strategy, tune=tune)
    arg = outputs[1] if reduce in ("max", "min") else None
    return binary.kernel_gradients(kernel, tensors, grads[0], arg, lhs, rhs, wants)


@operator("gspmm", _fake, _gradient, saves_outputs=(1,), autocast=precision.caster("gspmm"))
def _gspmm(
    g: Graph, op: str, reduce: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None, strategy: str, tune: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``gspmm`` with its operands checked: (output, max/min's winners or an empty tensor)."""
    kernel, tensors = binary.kernel(g, "v", op, "u", "e", lhs, rhs, reduce, strategy=strategy, tune=tune)
    out, arg = kernel.evaluate(tensors, want_arg=reduce in ("max", "min"))
    arg = out.new_empty(0, dtype=torch.int64) if arg is None else arg
    return (out.squeeze(-1) if binary.scalar_features(lhs, rhs) else out), arg
