"""``gspmm``: reduce op(source data, edge data) over each vertex's in-edges, with gradients.

Forward: an SpMM with the op inlined. Gradient of the source data: an SpMM over the reversed graph; of the
edge data: an SDDMM (see ``lowering``), by the rules of ``binary``. For max/min only the winning edge of
each output element receives gradient: the kernel's own gradients, derived from the op's UDF, visit the
n x features winners the forward kept (``templates.winner``), never E x features.
"""

from __future__ import annotations

import torch

from ..graph import Graph
from ..graph.graph import GraphRef
from ..operator import operator
from ..templates.gradients import placeholder_gradients
from ..templates.kernel import divide_by_in_degree
from . import binary, lowering, precision
from .checks import check_graph

SPMM_OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")
REDUCERS = ("sum", "mean", "max", "min")


def _features(x: torch.Tensor) -> tuple[int, ...]:
    return tuple(x.shape[1:]) or (1,)


def scalar_features(*operands: torch.Tensor | None) -> bool:
    """DGL's scalar features: every operand given is 1-D (one value per row), so the result is 1-D too."""
    return all(x.dim() == 1 for x in operands if x is not None)


def out_shape(num_nodes: int, lhs: torch.Tensor | None, rhs: torch.Tensor | None) -> tuple[int, ...]:
    """Shape rule: (num_nodes, *broadcast(lhs features, rhs features)), (num_nodes,) for scalar features."""
    if scalar_features(lhs, rhs):
        return (num_nodes,)
    shapes = [_features(x) for x in (lhs, rhs) if x is not None]
    return (num_nodes, *torch.broadcast_shapes(*shapes))


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
    shape = out_shape(ref.num_dst_nodes, lhs, rhs)
    winners = (ref.num_dst_nodes, *(_features(given) if scalar_features(lhs, rhs) else shape[1:]))
    return given.new_empty(shape), given.new_empty(winners if reduce in ("max", "min") else (0,), dtype=torch.int64)


def _gradient(
    g: Graph, op: str, reduce: str, lhs, rhs, strategy: str, tune: bool, *, outputs, grads, wants
) -> list[torch.Tensor | None]:
    """The gradients of (lhs, rhs): through max/min's winners, or by the rules of ``binary``."""
    grad = grads[0].unsqueeze(-1) if scalar_features(lhs, rhs) else grads[0]
    if reduce in ("max", "min"):
        return list(winner_gradients(g, op, reduce, lhs, rhs, outputs[1], grad, tuple(wants), strategy, tune))
    return list(gradients(g, op, reduce, lhs, rhs, grad, tuple(wants), strategy, tune))


@operator("gspmm", _fake, _gradient, saves_outputs=(1,), autocast=precision.caster("gspmm"))
def _gspmm(
    g: Graph, op: str, reduce: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None, strategy: str, tune: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``gspmm`` with its operands checked: (output, max/min's winners or an empty tensor)."""
    if reduce in ("max", "min"):
        out, arg = _aggregate(g, op, reduce, lhs, rhs, strategy, tune, return_arg=True)
    else:
        out = _aggregate(g, op, reduce, lhs, rhs, strategy, tune)
        arg = out.new_empty(0, dtype=torch.int64)
    return (out.squeeze(-1) if scalar_features(lhs, rhs) else out), arg


def _aggregate(
    g: Graph, op: str, reduce: str, lhs, rhs, strategy: str, tune: bool, return_arg: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The forward kernel of ``op`` with ``reduce`` (autograd through the kernel where inputs need it); with
    ``return_arg`` also max/min's winners."""
    names, fn = binary.BINARY_OPS[op].forward
    roles = _roles(lhs, rhs)
    return lowering.run(
        g, "v", [roles[n] for n in names], lambda loads: fn(*loads), f"gspmm-{op}", reduce,
        return_arg=return_arg, strategy=strategy, tune=tune,
    )  # fmt: skip


def winner_gradients(
    g: Graph, op: str, reduce: str, lhs, rhs, arg: torch.Tensor, grad_out: torch.Tensor, wants: tuple[bool, bool],
    strategy: str, tune: bool = False,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """max/min: the gradients of (lhs, rhs) where ``wants``, through the forward kernel's winners ``arg``."""
    names, fn = binary.BINARY_OPS[op].forward
    roles = _roles(lhs, rhs)
    kernel, tensors = lowering.bind(
        g, "v", [roles[n] for n in names], lambda loads: fn(*loads), f"gspmm-{op}", reduce, strategy=strategy,
        tune=tune,
    )  # fmt: skip
    wanted = [name for name, want in zip(("lhs", "rhs"), wants, strict=True) if want and name in tensors]
    grads = placeholder_gradients(kernel, tensors, grad_out, arg, None, wanted)
    return tuple(grads[n].view_as(x) if n in grads else None for n, x in (("lhs", lhs), ("rhs", rhs)))


def gradients(
    g: Graph, op: str, reduce: str, lhs, rhs, grad_out: torch.Tensor, wants: tuple[bool, bool], strategy: str,
    tune: bool = False,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """sum/mean: the gradients of (lhs, rhs) where ``wants``, each a kernel by the rules of ``binary``."""
    rule = binary.BINARY_OPS[op]
    grad_out = grad_out.contiguous()
    if reduce == "mean":
        grad_out = divide_by_in_degree(g, grad_out)
    roles = _roles(lhs, rhs, grad_out)
    grads: dict[str, torch.Tensor | None] = {"a": None, "b": None}
    for name, x, target, grad_rule, want in (
        ("a", lhs, "u", rule.grad_lhs, wants[0]),
        ("b", rhs, "e", rule.grad_rhs, wants[1]),
    ):
        if want and grad_rule is not None:
            names, fn = grad_rule
            grad = lowering.run(
                g, target, [roles[n] for n in names], lambda loads, fn=fn: fn(*loads), f"gspmm-{op}-d{name}",
                result=_features(x), strategy=strategy, tune=tune,
            )  # fmt: skip
            grads[name] = grad.view_as(x)
    return grads["a"], grads["b"]


def _roles(lhs, rhs, grad=None) -> dict[str, tuple[str, str, torch.Tensor]]:
    """Each rule operand as (placeholder, target, tensor); the placeholders bear the arguments' names, which
    the errors about them then quote."""
    return {"a": ("lhs", "u", lhs), "b": ("rhs", "e", rhs), "g": ("g", "v", grad)}
