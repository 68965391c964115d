"""``gspmm``: reduce op(source data, edge data) over each vertex's in-edges, with gradients.

Forward: an SpMM with the op inlined. Gradient of the source data: an SpMM over the reversed graph; of the
edge data: an SDDMM (see ``lowering``). For max/min only the winning edge of each output element receives
gradient; that is gathered through the arg indices the forward kept (n x features, never E x features,
except for edge data whose own shape is E x features).
"""

from __future__ import annotations

import torch

from ..backends import cpu, toolchain
from ..backends.cpu.scatter import winner_scatter_source
from ..graph import Graph
from ..templates.kernel import divide_by_in_degree
from . import binary, lowering
from .udfs import TORCH_TO_TE

SPMM_OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")
REDUCERS = ("sum", "mean", "max", "min")


def _features(x: torch.Tensor) -> tuple[int, ...]:
    return tuple(x.shape[1:]) or (1,)


def out_shape(num_nodes: int, lhs: torch.Tensor | None, rhs: torch.Tensor | None) -> tuple[int, ...]:
    """Shape rule: (num_nodes, *broadcast(lhs features, rhs features))."""
    shapes = [_features(x) for x in (lhs, rhs) if x is not None]
    return (num_nodes, *torch.broadcast_shapes(*shapes))


def gspmm(
    g: Graph,
    op: str,
    reduce: str,
    lhs: torch.Tensor | None,
    rhs: torch.Tensor | None,
    strategy: str = "gar",
    tune: bool = False,
) -> torch.Tensor:
    """DGL's ``gspmm``: ``out[v] = reduce_{e = (u -> v)} op(lhs[u], rhs[e])``.

    ``op`` in add, sub, mul, div, copy_lhs, copy_rhs; ``reduce`` in sum, mean, max, min (vertices without
    in-edges get 0). Feature shapes broadcast as in NumPy, e.g. lhs (n, h, d) with rhs (E, h, 1).
    ``strategy``: "gar" (default: vertex-centric over the CSR, deterministic), "gas" (edge-centric with
    atomics: no CSR needed, sum/mean only, NOT deterministic in the last bits) or "auto" (opt-in, see
    ``lowering.choose_strategy``: GAS only for messages of width <= 2 on a graph without a CSR yet).
    ``tune=True`` tunes the forward and gradient kernels for this graph and shape on first use
    (``featgraph.tuning``; results cached on disk).
    """
    rule = binary.get(op, SPMM_OPS)
    if reduce not in REDUCERS:
        raise ValueError(f"reduce must be one of {REDUCERS}, got {reduce!r}")
    return _GSpMM.apply(g, op, reduce, *binary.operands(op, rule, lhs, rhs), strategy, tune)


def _roles(lhs, rhs, grad=None) -> dict[str, tuple[str, str, torch.Tensor]]:
    return {"a": ("a", "u", lhs), "b": ("b", "e", rhs), "g": ("g", "v", grad)}


class _GSpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, g: Graph, op: str, reduce: str, lhs, rhs, strategy: str, tune: bool):  # noqa: D102
        names, fn = binary.BINARY_OPS[op].forward
        roles = _roles(lhs, rhs)
        result = lowering.run(
            g, "v", [roles[n] for n in names], lambda loads: fn(*loads), f"gspmm-{op}", reduce,
            return_arg=reduce in ("max", "min"), strategy=strategy, tune=tune,
        )  # fmt: skip
        out, arg = result if isinstance(result, tuple) else (result, None)
        ctx.g, ctx.op, ctx.reduce, ctx.strategy, ctx.tune = g, op, reduce, strategy, tune
        ctx.save_for_backward(lhs, rhs, arg)
        return out

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        lhs, rhs, arg = ctx.saved_tensors
        g, rule = ctx.g, binary.BINARY_OPS[ctx.op]
        grad_out = grad_out.contiguous()
        wants = {"a": ctx.needs_input_grad[3], "b": ctx.needs_input_grad[4]}
        if ctx.reduce in ("max", "min"):
            grads = _winner_grads(g, ctx.op, lhs, rhs, arg, grad_out, wants)
            return None, None, None, grads["a"], grads["b"], None, None
        if ctx.reduce == "mean":
            grad_out = divide_by_in_degree(g, grad_out)
        roles = _roles(lhs, rhs, grad_out)
        grads: dict[str, torch.Tensor | None] = {"a": None, "b": None}
        for name, x, target, grad_rule in (("a", lhs, "u", rule.grad_lhs), ("b", rhs, "e", rule.grad_rhs)):
            if wants[name] and grad_rule is not None:
                names, fn = grad_rule
                grad = lowering.run(
                    g, target, [roles[n] for n in names], lambda loads, fn=fn: fn(*loads),
                    f"gspmm-{ctx.op}-d{name}", result=_features(x), strategy=ctx.strategy, tune=ctx.tune,
                )  # fmt: skip
                grads[name] = grad.view_as(x)
        return None, None, None, grads["a"], grads["b"], None, None


def _winner_grads(g: Graph, op: str, lhs, rhs, arg, grad_out, wants) -> dict[str, torch.Tensor | None]:
    """Gradients of max/min: each output element's gradient goes to the operands of its winning edge.
    Copies (the common case: max/min of source or edge features) take one scatter kernel with no n x F
    temporaries; other ops gather the winning operands and scatter in torch."""
    src, _ = g.coo()
    copied = {"copy_lhs": ("a", lhs, src), "copy_rhs": ("b", rhs, None)}.get(op)
    if copied is not None and grad_out.dtype in (torch.float32, torch.float64) and grad_out.device.type == "cpu":
        name, x, rows = copied
        if x.numel() == x.shape[0] * grad_out[0].numel():  # not broadcast: one gradient element per element
            grad = torch.zeros(x.shape[0], grad_out[0].numel(), dtype=grad_out.dtype)
            kernel = cpu.compile_source(winner_scatter_source(TORCH_TO_TE[grad_out.dtype]))
            num_out = grad_out.shape[0]
            cpu.launch(
                kernel, [grad_out, arg.contiguous(), rows, grad], [num_out, grad.shape[1], toolchain.num_threads()]
            )
            return {"a": None, "b": None, name: grad.view_as(x) if wants[name] else None}
    rule = binary.BINARY_OPS[op]
    has = arg >= 0
    edge = arg.clamp(min=0)
    source = src[edge]
    full = grad_out.shape[1:]

    def at(x: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor | None:
        if x is None:
            return None
        x2 = x.unsqueeze(1) if x.dim() == 1 else x
        padded = x2.reshape(x2.shape[0], *([1] * (len(full) - (x2.dim() - 1))), *x2.shape[1:])
        return torch.gather(padded.expand(x2.shape[0], *full), 0, rows)

    values = {"a": at(lhs, source), "b": at(rhs, edge), "g": grad_out}
    grads: dict[str, torch.Tensor | None] = {"a": None, "b": None}
    for name, x, rows, grad_rule in (("a", lhs, source, rule.grad_lhs), ("b", rhs, edge, rule.grad_rhs)):
        if not wants[name] or grad_rule is None:
            continue
        names, fn = grad_rule
        contribution = torch.where(has, fn(*[values[n] for n in names]), 0)
        total = torch.zeros((x.shape[0], *full), dtype=grad_out.dtype).scatter_add_(0, rows, contribution)
        x2 = x.unsqueeze(1) if x.dim() == 1 else x
        grads[name] = total.sum_to_size(x2.shape).view_as(x)
    return grads
