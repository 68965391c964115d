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
from typing import Any

import torch

from .. import te
from ..backends.cpu import buffers
from ..graph import Graph
from ..kernel_spec import TORCH_DTYPES
from ..operator import operator
from ..te.expr import GRAPH_KINDS, BinOp, Call, ComputeOp, Const, Expr, Load, Placeholder, Reduce, Var, per_op
from ..te.grad import ZERO, add, diff, is_zero, mul, substitute, where
from .edge_sum import edge_sum
from .kernel import Kernel, compute_dtype, divide_by_in_degree, registered, trace_udf
from .sddmm import sddmm
from .spmm import spmm
from .winner import ARG, PRIVATE_COPY_BUDGET, WinnerParams, private_copy_bytes, winner_scatter

GRAD, OUT = "fg_grad", "fg_out"
TORCH_NAMES = {dtype: name for name, dtype in TORCH_DTYPES.items()}


def _role(site: Load) -> str:
    first = site.indices[0]
    return first.kind if isinstance(first, Var) and first.kind in GRAPH_KINDS else "dense"


def _sites(op: ComputeOp, p: Placeholder) -> list[Load]:
    """Every load of ``p`` in the UDF; a Load reused in several places is one site (the tree is a DAG)."""
    sites: list[Load] = []
    for node in op.nodes:
        if isinstance(node, Load) and node.tensor is p and not any(node is q for q in sites):
            sites.append(node)
    return sites


def _feature_index(site: Load) -> tuple[Expr, ...]:
    """The site's index expressions over its placeholder's feature axes (every axis of a dense one)."""
    return site.indices if _role(site) == "dense" else site.indices[1:]


def _in_range(axis: Var, start: int, extent: int) -> Expr:
    """An index that equals ``axis`` where it lies in ``[start, start + extent)`` and stays inside that range
    elsewhere (``start + (axis - start) mod extent``), so a term evaluated at a position outside the range
    reads nothing out of bounds before it is discarded."""
    if extent == 1:
        return Const(start)
    shifted = BinOp("+", axis, Const(-start % extent)) if start % extent else axis
    return add(Const(start), BinOp("%", shifted, Const(extent)))


def _bind_axes(
    p: Placeholder, site: Load, axes: tuple[Var, ...], pinned: dict[int, Var] | None = None
) -> tuple[dict[int, Expr], list[Expr], tuple[Var, ...]]:
    """Bind the site's index to ``p``'s gradient ``axes``: the loop variable indexing each axis maps to it
    (first use), or to the ``pinned`` variable standing for it (the winner scatter's output positions).
    Returns that mapping, the conditions under which a gradient position receives the site's term (a
    constant index, a variable covering part of the axis) and the variable addressing each axis."""
    pinned = pinned or {}
    mapping: dict[int, Expr] = {}
    conditions: list[Expr] = []
    write: list[Var] = []
    for t, idx in enumerate(_feature_index(site)):
        axis = axes[t]
        if isinstance(idx, Var) and idx.kind in ("axis", "reduce") and id(idx) not in mapping:
            if id(idx) in pinned:
                mapping[id(idx)] = pinned[id(idx)]
                write.append(pinned[id(idx)])
                continue
            start = idx.start if idx.kind == "reduce" else 0
            stop = start + idx.extent
            mapping[id(idx)] = axis if (start, stop) == (0, axis.extent) else _in_range(axis, start, idx.extent)
            conditions += [BinOp(">=", axis, Const(start))] if start > 0 else []
            conditions += [BinOp("<", axis, Const(stop))] if stop < axis.extent else []
        elif isinstance(idx, Const):
            conditions.append(Call("eq", (axis, idx)))
        else:
            raise NotImplementedError(
                f"gradient of {p.name!r}: each index must be one axis used once, or a constant; got {idx}"
            )
        write.append(axis)
    return mapping, conditions, tuple(write)


def _restrict(term: Expr, conditions: list[Expr]) -> Expr:
    """``term`` where every condition holds, else 0 (a select: the discarded term never multiplies)."""
    for condition in conditions:
        term = where(condition, term, ZERO)
    return term


def _with_unit_axis(axes: tuple[Var, ...]) -> tuple[Var, ...]:
    """``axes``, or one axis of extent 1 where there are none: a compute needs an axis, and a placeholder
    with no feature axes (``W[eid]`` of an ``(E,)`` W, ``X[src]`` of an ``(N,)`` X) has a gradient of one
    value per row, which ``placeholder_gradients`` views back to the placeholder's shape."""
    return axes or (Var("gj0", "axis", 1),)


def _gradient_axes(p: Placeholder, role: str) -> tuple[Var, ...]:
    dims = p.shape if role == "dense" else p.shape[1:]
    return _with_unit_axis(tuple(Var(f"gj{t}", "axis", extent) for t, extent in enumerate(dims)))


def gradient_terms(
    op: ComputeOp, kind: str, reducer: str | None, p: Placeholder, grad_dtype: str
) -> dict[str, tuple[tuple[Var, ...], Expr]]:
    """Per role (src/dst/eid/dense): P's gradient axes and the expression summed into them per edge, for
    ``op`` in a template of ``kind`` with ``reducer``. The output's gradient (and logsumexp's output,
    max/min's winners) are read per row without a row count: the terms hold on any graph."""
    row_kind = {"spmm": "dst", "sddmm": "eid"}.get(kind)  # an edge sum's output has no rows
    rows = () if row_kind is None else (None,)
    out_index = () if row_kind is None else (Var(row_kind, row_kind),)
    grad = te.placeholder((*rows, *op.shape), dtype=grad_dtype, name=GRAD)
    # logsumexp weighs each edge's term by its softmax share exp(msg - out[dst])
    out = te.placeholder((*rows, *op.shape), dtype=grad_dtype, name=OUT) if reducer == "logsumexp" else None
    # max/min: only the winning edge of each output element contributes
    arg = te.placeholder((*rows, *op.shape), dtype="int64", name=ARG) if reducer in ("max", "min") else None
    terms: dict[str, tuple[tuple[Var, ...], Expr]] = {}
    for site in _sites(op, p):
        role = _role(site)
        if role not in terms:
            terms[role] = (_gradient_axes(p, role), ZERO)
        axes, total = terms[role]
        mapping, conditions, _ = _bind_axes(p, site, axes)
        term = mul(Load(grad, (*out_index, *op.axis)), diff(op.body, site))
        if out is not None:
            term = mul(te.exp(op.body - Load(out, (*out_index, *op.axis))), term)
        if arg is not None:
            term = _restrict(term, [Call("eq", (Load(arg, (*out_index, *op.axis)), Var("eid", "eid")))])
        summed = {
            id(a): te.reduce_axis((0, a.extent), name=f"o{n}") for n, a in enumerate(op.axis) if id(a) not in mapping
        }
        rename = {**mapping, **summed}
        term = substitute(term, lambda v, rename=rename: rename.get(id(v)))
        if summed:
            term = Reduce("sum", term, tuple(summed.values()))
        terms[role] = (axes, add(total, _restrict(term, conditions)))
    return terms


def winner_terms(kernel: Kernel, p: Placeholder, grad_dtype: str) -> dict[str, tuple[ComputeOp, WinnerParams]] | None:
    """Per role, the winner-scatter form of P's max/min gradient: the term of one output element at its
    winning edge, computed over P's axes that no output axis pins. None when two sites of one role pin
    P's axes differently (the masked form handles that)."""
    op = kernel.spec.op
    grad = te.placeholder((None, *op.shape), dtype=grad_dtype, name=GRAD)
    outer = tuple(Var(f"fo{n}", "outer", a.extent) for n, a in enumerate(op.axis))
    to_outer = {id(a): o for a, o in zip(op.axis, outer, strict=True)}
    axes_of: dict[str, tuple[Var, ...]] = {}
    found: dict[str, tuple[tuple[Var, ...], Expr]] = {}
    for site in _sites(op, p):
        role = _role(site)
        axes = axes_of.setdefault(role, _gradient_axes(p, role))
        mapping, conditions, write = _bind_axes(p, site, axes, pinned=to_outer)
        if role in found and found[role][0] != write:
            return None
        term = mul(Load(grad, (Var("dst", "dst"), *outer)), diff(op.body, site))
        rename = {**to_outer, **mapping}  # output axes are fixed per visited element, not summed
        term = _restrict(substitute(term, lambda v, rename=rename: rename.get(id(v))), conditions)
        found[role] = (write, add(found[role][1], term) if role in found else term)
    result = {}
    for role, (write, body) in found.items():
        if is_zero(body):
            continue
        free = _with_unit_axis(tuple(v for v in write if v.kind == "axis"))
        compute = ComputeOp(tuple(v.extent for v in free), free, body, "grad")
        shape = kernel.input_shape(p.name)
        params = WinnerParams(role, outer, write, shape, kernel.spec.params.num_threads)
        result[role] = (compute, params)
    return result


def _udf(
    axes: tuple[Var, ...], body: Expr, swap: bool, dtype: str | None = None
) -> Callable[[Var, Var, Var], ComputeOp]:
    """The gradient as a UDF; ``swap`` exchanges src and dst for kernels over the reversed graph; ``dtype``
    the gradient's stored dtype (None: promoted from what it reads)."""
    kinds = {"src": "dst", "dst": "src", "eid": "eid"} if swap else {k: k for k in GRAPH_KINDS}

    def udf(src: Var, dst: Var, eid: Var) -> ComputeOp:
        new = {"src": src, "dst": dst, "eid": eid}
        expr = substitute(body, lambda v: new[kinds[v.kind]] if v.kind in GRAPH_KINDS else None)
        return ComputeOp(tuple(a.extent for a in axes), axes, expr, "grad", dtype=dtype)

    return udf


def gradient_kernels(kernel: Kernel, p: Placeholder, grad_dtype: str) -> list[tuple[str, Kernel]]:
    """The kernels whose results add up to d(loss)/dP (with the role each lands in), derived from the UDF and
    compiled on first use, then kept on ``kernel``."""
    key = (p.name, grad_dtype)
    if key not in kernel._gradients:
        parts = _derive_kernels(kernel, p, grad_dtype)
        if kernel.held_by_graph:  # so are the kernels of its gradient, over the same graph or its reverse
            for _, part in parts:
                part.owned_by_graph()
        kernel._gradients[key] = parts
    return kernel._gradients[key]


def _derive_kernels(kernel: Kernel, p: Placeholder, grad_dtype: str) -> list[tuple[str, Kernel]]:
    graph: Graph = kernel.graph
    if kernel.spec.reducer in ("max", "min"):
        winners = winner_terms(kernel, p, grad_dtype)
        threads, target = kernel._threads(), kernel.target
        if winners is not None and all(
            private_copy_bytes(params, compute_dtype(compute), target, threads) <= PRIVATE_COPY_BUDGET
            for compute, params in winners.values()
        ):
            return [(role, winner_scatter(graph, c, params, target)) for role, (c, params) in winners.items()]
    options = {"num_threads": kernel.spec.params.num_threads, "tuner": kernel.tuner, "target": kernel.target}
    # an edge-centric (GAS) aggregation's gradient aggregations are edge-centric too: no CSR is built for them
    gas = {"strategy": "gas"} if getattr(kernel.spec.params, "strategy", "gar") == "gas" else {}
    spec = kernel.spec
    kernels = []
    for role, udf in gradient_udfs(spec.op, spec.kind, spec.reducer, p.name, grad_dtype):
        if role == "src":
            built = spmm(graph.reverse(), udf, "sum", **options, **gas)
        elif role == "dst":
            built = spmm(graph, udf, "sum", **options, **gas)
        elif role == "eid":
            built = sddmm(graph, udf, **options)
        else:
            built = edge_sum(graph, udf, **options)
        kernels.append((role, built))
    return kernels


@per_op
def gradient_udfs(
    op: ComputeOp, kind: str, reducer: str | None, name: str, grad_dtype: str
) -> tuple[tuple[str, ComputeOp], ...]:
    """Per role, the traced UDF of placeholder ``name``'s gradient (over the reversed graph for "src"):
    derived once per op, so a UDF shared across graphs (``kernel.shared_op``) is differentiated once."""
    p = next(q for q in op.placeholders if q.name == name)
    # P does not influence the output through the sites whose term is zero
    terms = gradient_terms(op, kind, reducer, p, grad_dtype)
    terms = {role: term for role, term in terms.items() if not is_zero(term[1])}
    # one kernel makes the whole gradient: stored in P's dtype at once (e.g. 16-bit features weighted by float32
    # factors), not in a wider promoted dtype and cast after
    dtype = p.dtype if len(terms) == 1 else None
    return tuple((role, trace_udf(_udf(axes, body, role == "src", dtype))) for role, (axes, body) in terms.items())


def gradient_reads(kernel: Kernel, wanted: list[str], grad_dtype: str) -> set[str]:
    """The placeholders of ``kernel`` whose values the gradient kernels of the ``wanted`` ones read; all of
    them where a gradient is not supported, so that backward, not this forward, raises that error."""
    read: set[str] = set()
    for p in kernel.spec.op.placeholders:
        if p.name in wanted and p.dtype != "int64":
            try:
                parts = gradient_kernels(kernel, p, grad_dtype)
            except NotImplementedError:
                return {q.name for q in kernel.spec.op.placeholders}
            for _, part in parts:
                read.update(part.placeholder_names)
    return read


def placeholder_gradients(
    kernel: Kernel,
    tensors: dict[str, torch.Tensor],
    grad_out: torch.Tensor,
    arg: torch.Tensor | None,
    out: torch.Tensor | None,
    wanted: list[str],
) -> dict[str, torch.Tensor]:
    """d(loss)/d(placeholder) for each ``wanted`` floating placeholder of ``kernel``, given its inputs, the
    gradient of its output, and what the forward kept: ``arg`` (max/min winners) and ``out`` (logsumexp)."""
    grad = buffers.contiguous(grad_out)
    if kernel.spec.reducer == "mean":
        grad = divide_by_in_degree(kernel.graph, grad)
    grad_dtype = TORCH_NAMES[grad.dtype]
    grads = {}
    for name in wanted:
        p = next(q for q in kernel.spec.op.placeholders if q.name == name)
        if p.dtype == "int64":
            continue
        total = None
        for _, part in gradient_kernels(kernel, p, grad_dtype):
            available = {**tensors, GRAD: grad, ARG: arg, OUT: out}
            inputs = {n: available[n] for n in part.placeholder_names}
            result = part.evaluate(inputs, want_arg=False)[0]
            total = result if total is None else total + result
        x = tensors[name]  # perhaps a meta tensor (not saved): its shape and dtype
        if total is None:
            grads[name] = torch.zeros(x.shape, dtype=x.dtype, device=grad.device)
        else:
            grads[name] = total.view(kernel.input_shape(name)).to(x.dtype)
    return grads


# ---- the ``featgraph::kernel`` operator: a kernel's call, differentiable by the kernels derived above -------
def _kernel_fake(key: str, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    kernel = registered(key)
    shape = kernel.output_shape()
    winners = kernel.spec.kind == "spmm" and kernel.spec.reducer in ("max", "min")
    out = inputs[0].new_empty(shape, dtype=kernel._out_dtype)
    return out, out.new_empty(shape if winners else (0,), dtype=torch.int64)


def _kernel_reads(args: list[Any], wants: list[bool]) -> list[bool]:
    """The placeholders the wanted gradients read: the gradient of a linear aggregation in X reads no X, so a
    chain of them (APPNP's K steps) keeps no input of each step."""
    key, _ = args
    kernel = registered(key)
    names = kernel.placeholder_names
    wanted = [n for n, w in zip(names, wants, strict=True) if w]
    read = gradient_reads(kernel, wanted, TORCH_NAMES[kernel._out_dtype])
    return [n in read for n in names]


def _kernel_outputs(args: list[Any]) -> tuple[int, ...]:
    """The outputs the gradients read: max/min's winners, logsumexp's output."""
    reducer = registered(args[0]).spec.reducer
    return {"max": (1,), "min": (1,), "logsumexp": (0,)}.get(reducer, ())


def _kernel_gradient(key: str, inputs: list[torch.Tensor], *, outputs, grads, wants) -> list[torch.Tensor | None]:
    """The gradients of the kernel ``key`` in its ``wants``ed placeholders."""
    kernel = registered(key)
    names = kernel.placeholder_names
    out, arg = outputs
    wanted = [n for n, w in zip(names, wants, strict=True) if w]
    grads_by_name = placeholder_gradients(kernel, dict(zip(names, inputs, strict=True)), grads[0], arg, out, wanted)
    return [grads_by_name.get(n) for n in names]


@operator(
    "kernel", _kernel_fake, _kernel_gradient, saves=_kernel_reads, saves_outputs=_kernel_outputs,
    holds=lambda args: registered(args[0]),
)  # fmt: skip
def _kernel_operator(key: str, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel ``key`` on its placeholders in order: (output, max/min's winners or an empty tensor)."""
    kernel = registered(key)
    out, arg = kernel.evaluate(dict(zip(kernel.placeholder_names, inputs, strict=True)), want_arg=True)
    return out, (out.new_empty(0, dtype=torch.int64) if arg is None else arg)
