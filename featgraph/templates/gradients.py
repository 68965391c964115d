"""Gradients of a compiled UDF kernel, derived from its expression tree and lowered as kernels again.

For a placeholder ``P``, every load site of ``P`` in the UDF contributes ``grad_out * d(body)/d(site)``,
re-indexed by ``P``'s own feature axes (an output axis or a freed reduce axis in the site's index becomes
``P``'s axis; output axes that ``P`` does not vary along are summed). Where the contribution lands decides
the template, as for the forward pass:

- ``P[src, ...]``: an SpMM over the reversed graph (each source collects from its out-edges);
- ``P[dst, ...]``: an SpMM over the graph; ``P[eid, ...]``: an SDDMM;
- ``P[k, i]`` with no graph index (a weight): an edge sum into P's shape.

For max/min aggregation only the winning edge of each output element contributes: the kernels compare the
forward pass's arg (an int64 placeholder) with the edge id. For logsumexp each edge's term is weighted by
its softmax share ``exp(msg - out[dst])``, recomputed from the forward's output. Nothing of size
E x features is stored.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import te
from ..graph import Graph
from ..te.expr import Call, ComputeOp, Const, Expr, Load, Placeholder, Reduce, Var
from ..te.grad import ONE, ZERO, add, diff, is_zero, mul, substitute, where
from .kernel import TORCH_DTYPES, Kernel, divide_by_in_degree

GRAD, ARG, OUT = "fg_grad", "fg_arg", "fg_out"
GRAPH_KINDS = ("src", "dst", "eid")


def _role(site: Load) -> str:
    first = site.indices[0]
    return first.kind if isinstance(first, Var) and first.kind in GRAPH_KINDS else "dense"


def gradient_terms(kernel: Kernel, p: Placeholder, grad_dtype: str) -> dict[str, tuple[tuple[Var, ...], Expr]]:
    """Per role (src/dst/eid/dense): P's gradient axes and the expression summed into them per edge."""
    spec, graph = kernel.spec, kernel.graph
    op = spec.op
    out_kind = "dst" if spec.kind == "spmm" else "eid"
    out_rows = graph.num_nodes if spec.kind == "spmm" else graph.num_edges
    grad = te.placeholder((out_rows, *op.shape), dtype=grad_dtype, name=GRAD)
    out_var = Var(out_kind, out_kind)  # graph variables are matched by kind when the gradient UDF is traced
    winner = None
    if spec.reducer in ("max", "min"):
        arg = te.placeholder((graph.num_nodes, *op.shape), dtype="int64", name=ARG)
        eid = Var("eid", "eid")
        winner = (arg, eid)
    terms: dict[str, tuple[tuple[Var, ...], Expr]] = {}
    sites: list[Load] = []
    for node in op.body.walk():  # a Load reused in several places is one site (the tree is a DAG)
        if isinstance(node, Load) and node.tensor is p and not any(node is q for q in sites):
            sites.append(node)
    for site in sites:
        role = _role(site)
        feature_dims = p.shape[1:] if role != "dense" else p.shape
        feature_index = site.indices[1:] if role != "dense" else site.indices
        if role not in terms:
            terms[role] = (tuple(Var(f"gj{t}", "axis", extent) for t, extent in enumerate(feature_dims)), ZERO)
        axes, total = terms[role]
        mapping: dict[int, Expr] = {}
        indicator: Expr = ONE
        for t, idx in enumerate(feature_index):
            if isinstance(idx, Var) and idx.kind in ("axis", "reduce") and id(idx) not in mapping:
                mapping[id(idx)] = axes[t]
            elif isinstance(idx, Const):
                indicator = mul(indicator, where(Call("eq", (axes[t], idx)), ONE, ZERO))
            else:
                raise NotImplementedError(
                    f"gradient of {p.name!r}: each index must be one axis used once, or a constant; got {idx}"
                )
        term = mul(mul(Load(grad, (out_var, *op.axis)), diff(op.body, site)), indicator)
        if spec.reducer == "logsumexp":
            out = te.placeholder((graph.num_nodes, *op.shape), dtype=grad_dtype, name=OUT)
            term = mul(te.exp(op.body - Load(out, (out_var, *op.axis))), term)
        if winner is not None:
            arg, eid = winner
            term = mul(where(Call("eq", (Load(arg, (out_var, *op.axis)), eid)), ONE, ZERO), term)
        summed = {
            id(a): te.reduce_axis((0, a.extent), name=f"o{n}") for n, a in enumerate(op.axis) if id(a) not in mapping
        }
        rename = {**mapping, **summed}
        term = substitute(term, lambda v, rename=rename: rename.get(id(v)))
        if summed:
            term = Reduce("sum", term, tuple(summed.values()))
        terms[role] = (axes, add(total, term))
    return terms


def _udf(axes: tuple[Var, ...], body: Expr, swap: bool) -> Callable[[Var, Var, Var], ComputeOp]:
    """The gradient as a UDF; ``swap`` exchanges src and dst for kernels over the reversed graph."""
    kinds = {"src": "dst", "dst": "src", "eid": "eid"} if swap else {k: k for k in GRAPH_KINDS}

    def udf(src: Var, dst: Var, eid: Var) -> ComputeOp:
        new = {"src": src, "dst": dst, "eid": eid}
        expr = substitute(body, lambda v: new[kinds[v.kind]] if v.kind in GRAPH_KINDS else None)
        return ComputeOp(tuple(a.extent for a in axes), axes, expr, "grad")

    return udf


def gradient_kernels(kernel: Kernel, p: Placeholder, grad_dtype: str) -> list[tuple[str, Kernel]]:
    """The kernels whose results add up to d(loss)/dP."""
    from .edge_sum import edge_sum
    from .sddmm import sddmm
    from .spmm import spmm

    graph: Graph = kernel.graph
    options = {"num_threads": kernel.spec.params.num_threads, "tune": kernel.tune, "target": kernel.target}
    kernels = []
    for role, (axes, body) in gradient_terms(kernel, p, grad_dtype).items():
        if is_zero(body):
            continue  # P does not influence the output through these sites
        if role == "src":
            built = spmm(graph.reverse(), _udf(axes, body, swap=True), "sum", **options)
        elif role == "dst":
            built = spmm(graph, _udf(axes, body, swap=False), "sum", **options)
        elif role == "eid":
            built = sddmm(graph, _udf(axes, body, swap=False), **options)
        else:
            built = edge_sum(graph, _udf(axes, body, swap=False), **options)
        kernels.append((role, built))
    return kernels


class UdfFunction(torch.autograd.Function):
    """Autograd for a compiled kernel: forward runs it, backward runs its gradient kernels."""

    @staticmethod
    def forward(ctx, kernel: Kernel, names: tuple[str, ...], box: dict, *tensors: torch.Tensor):  # noqa: D102
        out, arg = kernel.evaluate(dict(zip(names, tensors, strict=True)), want_arg=True)
        box["arg"] = arg
        ctx.kernel, ctx.names, ctx.arg = kernel, names, arg
        keeps_out = kernel.spec.reducer == "logsumexp"  # its gradient weighs edges by exp(msg - out)
        ctx.save_for_backward(*tensors, *([out] if keeps_out else []))
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # noqa: D102
        kernel: Kernel = ctx.kernel
        saved = ctx.saved_tensors
        tensors = dict(zip(ctx.names, saved[: len(ctx.names)], strict=True))
        out = saved[-1] if len(saved) > len(ctx.names) else None
        grad = grad_out.contiguous()
        if kernel.spec.reducer == "mean":
            grad = divide_by_in_degree(kernel.graph, grad)
        grad_dtype = {v: k for k, v in TORCH_DTYPES.items()}[grad.dtype]
        grads = []
        for name, needed in zip(ctx.names, ctx.needs_input_grad[3:], strict=True):
            p = next(q for q in kernel.spec.op.placeholders if q.name == name)
            if not needed or p.dtype == "int64":
                grads.append(None)
                continue
            total = None
            for _, part in kernel.gradient_kernels(p, grad_dtype):
                available = {**tensors, GRAD: grad, ARG: ctx.arg, OUT: out}
                inputs = {n: available[n] for n in part.placeholder_names}
                result = part.evaluate(inputs, want_arg=False)[0]
                total = result if total is None else total + result
            x = tensors[name]
            grads.append(torch.zeros_like(x) if total is None else total.view(p.shape).to(x.dtype))
        return (None, None, None, *grads)
