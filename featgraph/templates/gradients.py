"""Gradients of a compiled UDF kernel, derived from its expression tree and lowered as kernels again.

For a placeholder ``P``, every load site of ``P`` in the UDF contributes ``grad_out * d(body)/d(site)``,
re-indexed by ``P``'s own feature axes (an output axis or a freed reduce axis in the site's index becomes
``P``'s axis; output axes that ``P`` does not vary along are summed). Where the contribution lands decides
the template, as for the forward pass:

- ``P[src, ...]``: an SpMM over the reversed graph (each source collects from its out-edges);
- ``P[dst, ...]``: an SpMM over the graph; ``P[eid, ...]``: an SDDMM;
- ``P[k, i]`` with no graph index (a weight): an edge sum into P's shape.

For max/min aggregation only the winning edge of each output element contributes: a winner scatter
(``winner.py``) visits the n x output winners the forward kept and evaluates each term once, at its
winning edge. Where it does not apply (two sites of P pinned to output axes differently, or CPU private
copies over budget) the kernels above compare the forward's arg (an int64 placeholder) with the edge id,
which visits every edge. For logsumexp each edge's term is weighted by
its softmax share ``exp(msg - out[dst])``, recomputed from the forward's output. Nothing of size
E x features is stored.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import te
from ..backends.cpu import buffers
from ..graph import Graph
from ..te.expr import Call, ComputeOp, Const, Expr, Load, Placeholder, Reduce, Var
from ..te.grad import ONE, ZERO, add, diff, is_zero, mul, substitute, where
from .kernel import TORCH_DTYPES, Kernel, compute_dtype, divide_by_in_degree
from .winner import ARG, PRIVATE_COPY_BUDGET, WinnerParams, private_copy_bytes, winner_scatter

GRAD, OUT = "fg_grad", "fg_out"
GRAPH_KINDS = ("src", "dst", "eid")


def _role(site: Load) -> str:
    first = site.indices[0]
    return first.kind if isinstance(first, Var) and first.kind in GRAPH_KINDS else "dense"


def _sites(op: ComputeOp, p: Placeholder) -> list[Load]:
    """Every load of ``p`` in the UDF; a Load reused in several places is one site (the tree is a DAG)."""
    sites: list[Load] = []
    for node in op.body.walk():
        if isinstance(node, Load) and node.tensor is p and not any(node is q for q in sites):
            sites.append(node)
    return sites


def _feature_index(site: Load) -> tuple[Expr, ...]:
    """The site's index expressions over its placeholder's feature axes (every axis of a dense one)."""
    return site.indices if _role(site) == "dense" else site.indices[1:]


def _bind_axes(p: Placeholder, site: Load, axes: tuple[Var, ...]) -> tuple[dict[int, Var], Expr, list[Var]]:
    """Bind the site's index to ``p``'s gradient ``axes``: the loop variable indexing each axis maps to it
    (first use), a constant index becomes an indicator; also the variable each axis is indexed by."""
    mapping: dict[int, Var] = {}
    indicator: Expr = ONE
    indexed_by: list[Var] = []
    for t, idx in enumerate(_feature_index(site)):
        if isinstance(idx, Var) and idx.kind in ("axis", "reduce") and id(idx) not in mapping:
            mapping[id(idx)] = axes[t]
            indexed_by.append(idx)
        elif isinstance(idx, Const):
            indicator = mul(indicator, where(Call("eq", (axes[t], idx)), ONE, ZERO))
            indexed_by.append(axes[t])
        else:
            raise NotImplementedError(
                f"gradient of {p.name!r}: each index must be one axis used once, or a constant; got {idx}"
            )
    return mapping, indicator, indexed_by


def _gradient_axes(p: Placeholder, role: str) -> tuple[Var, ...]:
    dims = p.shape if role == "dense" else p.shape[1:]
    return tuple(Var(f"gj{t}", "axis", extent) for t, extent in enumerate(dims))


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
    for site in _sites(op, p):
        role = _role(site)
        if role not in terms:
            terms[role] = (_gradient_axes(p, role), ZERO)
        axes, total = terms[role]
        mapping, indicator, _ = _bind_axes(p, site, axes)
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


def winner_terms(kernel: Kernel, p: Placeholder, grad_dtype: str) -> dict[str, tuple[ComputeOp, WinnerParams]] | None:
    """Per role, the winner-scatter form of P's max/min gradient: the term of one output element at its
    winning edge, computed over P's axes that no output axis pins. None when two sites of one role pin
    P's axes differently (the masked form handles that)."""
    spec, graph = kernel.spec, kernel.graph
    op = spec.op
    grad = te.placeholder((graph.num_nodes, *op.shape), dtype=grad_dtype, name=GRAD)
    outer = tuple(Var(f"fo{n}", "outer", a.extent) for n, a in enumerate(op.axis))
    to_outer = {id(a): o for a, o in zip(op.axis, outer, strict=True)}
    axes_of: dict[str, tuple[Var, ...]] = {}
    found: dict[str, tuple[tuple[Var, ...], Expr]] = {}
    for site in _sites(op, p):
        role = _role(site)
        axes = axes_of.setdefault(role, _gradient_axes(p, role))
        mapping, indicator, indexed_by = _bind_axes(p, site, axes)
        write = tuple(to_outer.get(id(v), a) for v, a in zip(indexed_by, axes, strict=True))
        if role in found and found[role][0] != write:
            return None
        term = mul(mul(Load(grad, (Var("dst", "dst"), *outer)), diff(op.body, site)), indicator)
        rename = {**mapping, **to_outer}  # output axes are fixed per visited element, not summed
        term = substitute(term, lambda v, rename=rename: rename.get(id(v)))
        found[role] = (write, add(found[role][1], term) if role in found else term)
    result = {}
    for role, (write, body) in found.items():
        if is_zero(body):
            continue
        free = tuple(v for v in write if v.kind == "axis") or (Var("w0", "axis", 1),)
        compute = ComputeOp(tuple(v.extent for v in free), free, body, "grad")
        params = WinnerParams(role, outer, write, p.shape, kernel.spec.params.num_threads)
        result[role] = (compute, params)
    return result


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
    if kernel.spec.reducer in ("max", "min"):
        winners = winner_terms(kernel, p, grad_dtype)
        threads, target = kernel._threads(), kernel.target
        if winners is not None and all(
            private_copy_bytes(params, compute_dtype(compute), target, threads) <= PRIVATE_COPY_BUDGET
            for compute, params in winners.values()
        ):
            return [(role, winner_scatter(graph, c, params, target)) for role, (c, params) in winners.items()]
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
        grad = buffers.contiguous(grad_out)
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
