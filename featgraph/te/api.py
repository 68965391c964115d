"""The user-facing constructors of the tensor-expression language (TVM-like names)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from .expr import FLOAT_DTYPES, Call, ComputeOp, Const, Expr, ExprLike, Placeholder, Reduce, Var, as_expr


def placeholder(
    shape: tuple[int | None, ...] | list[int | None], dtype: str = "float32", name: str = "X"
) -> Placeholder:
    """An input tensor of ``shape``. Its first dimension is indexed by ``src``/``dst`` (vertex data),
    ``eid`` (edge data) or by constants and axes (dense parameters such as a weight matrix). int64
    placeholders hold ids (e.g. winning edges) and may be compared with ``te.equal`` or used as indices.

    A first dimension of ``None`` (vertex or edge data only) has as many rows as the graph a kernel binds
    has vertices or edges: the traced UDF then describes the same kernel on every graph, so the ops trace
    it once for all of a loader's blocks (``templates.kernel.shared_op``)."""
    if not isinstance(shape, (tuple, list)) or not shape:
        raise ValueError(f"placeholder {name!r} needs a non-empty shape, got {shape!r}")
    if any(s is None for s in shape[1:]):
        raise ValueError(f"placeholder {name!r}: only the first dimension (the rows) may be None, got {shape}")
    dims = tuple(None if s is None else int(s) for s in shape)
    if any(s is not None and s < 0 for s in dims):
        raise ValueError(f"placeholder {name!r} needs a non-empty, non-negative shape, got {shape}")
    if dtype not in (*FLOAT_DTYPES, "int64"):
        raise TypeError(f"placeholder {name!r}: dtype must be one of {(*FLOAT_DTYPES, 'int64')}, got {dtype!r}")
    if not name.isidentifier():
        raise ValueError(f"placeholder name must be an identifier, got {name!r}")
    return Placeholder(dims, dtype, name)


def compute(
    shape: tuple[int, ...] | list[int], fn: Callable[..., ExprLike], name: str = "out", dtype: str | None = None
) -> ComputeOp:
    """Output of ``shape`` whose element at ``(i, j, ...)`` is ``fn(i, j, ...)``; called once, symbolically.
    ``dtype`` stores the output in that floating dtype (accumulated in float32 or float64 all the same, rounded
    once): e.g. a bfloat16 aggregation weighted by float32 factors; None promotes the placeholders' dtypes."""
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise ValueError(f"compute dtype must be one of {FLOAT_DTYPES} or None, got {dtype!r}")
    dims = tuple(int(s) for s in shape)
    if not dims or any(s <= 0 for s in dims):
        raise ValueError(f"compute shape must be non-empty and positive, got {shape}")
    params = _parameter_names(fn)
    if params is None:  # fn(*axes): numbered
        params = [f"i{n}" for n in range(len(dims))]
    if len(params) != len(dims):
        raise ValueError(f"compute of {len(dims)} dims needs a function of {len(dims)} axes, got {len(params)}")
    axes = tuple(Var(f"ax_{p}", "axis", extent) for p, extent in zip(params, dims, strict=True))
    return ComputeOp(dims, axes, as_expr(fn(*axes)), name, dtype=dtype)


def _parameter_names(fn: Callable) -> list[str] | None:
    """``fn``'s parameter names, None where it takes ``*args``; read from a plain function's code object (a
    mini-batch traces every UDF again for each block, and ``inspect.signature`` was a quarter of that)."""
    code = getattr(fn, "__code__", None)
    if code is None or inspect.ismethod(fn) or hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        signature = inspect.signature(fn).parameters.values()
        return None if any(p.kind == p.VAR_POSITIONAL for p in signature) else [p.name for p in signature]
    if code.co_flags & inspect.CO_VARARGS:
        return None
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return list(code.co_varnames[:count])


_reduce_counter = iter(range(1 << 30))


def reduce_axis(dom: tuple[int, int] | int, name: str = "k") -> Var:
    """A reduction variable over ``range(lo, hi)`` (or ``range(dom)``), consumed by ``te.sum/max/min``."""
    lo, hi = (0, dom) if isinstance(dom, int) else (int(dom[0]), int(dom[1]))
    if hi <= lo:
        raise ValueError(f"reduce_axis range must be non-empty, got ({lo}, {hi})")
    return Var(f"rk_{name}_{next(_reduce_counter)}", "reduce", hi - lo, lo)


def _reducer(op: str, expr: ExprLike, axis: Var | tuple[Var, ...] | list[Var]) -> Reduce:
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if not axes or any(not isinstance(a, Var) or a.kind != "reduce" for a in axes):
        raise TypeError(f"te.{op}(expr, axis=...) needs reduce axes made by te.reduce_axis")
    return Reduce(op, as_expr(expr), axes)


def sum(expr: ExprLike, axis: Var | tuple[Var, ...]) -> Reduce:  # noqa: A001 - TVM's name
    """Sum of ``expr`` over the reduce ``axis``."""
    return _reducer("sum", expr, axis)


def max(a: ExprLike, b: ExprLike | None = None, axis: Var | tuple[Var, ...] | None = None) -> Expr:  # noqa: A001
    """``te.max(expr, axis=k)`` reduces; ``te.max(a, b)`` is the elementwise maximum (``te.max(x, 0)``: relu)."""
    return _min_max("max", a, b, axis)


def min(a: ExprLike, b: ExprLike | None = None, axis: Var | tuple[Var, ...] | None = None) -> Expr:  # noqa: A001
    """``te.min(expr, axis=k)`` reduces; ``te.min(a, b)`` is the elementwise minimum."""
    return _min_max("min", a, b, axis)


def _min_max(op: str, a: ExprLike, b: ExprLike | None, axis: Var | tuple[Var, ...] | None) -> Expr:
    if axis is not None:
        if b is not None:
            raise TypeError(f"te.{op} takes either two expressions or one expression and axis=")
        return _reducer(op, a, axis)
    if b is None:
        raise TypeError(f"te.{op}(expr) needs axis=; for the elementwise {op} of two values write te.{op}(a, b)")
    return Call(op, (as_expr(a), as_expr(b)))


def _unary(fn: str) -> Callable[[ExprLike], Call]:
    def build(x: ExprLike) -> Call:
        return Call(fn, (as_expr(x),))

    build.__name__ = fn
    build.__doc__ = f"Elementwise {fn}."
    return build


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
abs = _unary("abs")  # noqa: A001


def where(cond: ExprLike, a: ExprLike, b: ExprLike) -> Call:
    """``a`` where ``cond`` holds, else ``b``."""
    return Call("where", (as_expr(cond), as_expr(a), as_expr(b)))


def equal(a: ExprLike, b: ExprLike) -> Call:
    """``a == b`` as a condition (``==`` itself is not overloaded, so expressions stay hashable)."""
    return Call("eq", (as_expr(a), as_expr(b)))


def keep(seed: ExprLike, element: ExprLike, p: float) -> Call:
    """Dropout's factor for ``element``: 0 with probability ``p``, else ``1 / (1 - p)``, decided by a hash of
    (``seed``, ``element``) - integer expressions, e.g. ``SEED[0]`` of an int64 placeholder and
    ``eid * heads + h``. The same seed and element give the same factor in every kernel, so a UDF's
    gradient kernels apply the forward's mask without it ever being stored."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"keep: the drop probability must be in [0, 1), got {p}")
    return Call("keep", (as_expr(seed), as_expr(element), Const(float(p))))


def cast(x: ExprLike, dtype: str) -> Call:
    """Round ``x`` to ``dtype`` (float16, bfloat16, float32, float64 or int64)."""
    if dtype not in (*FLOAT_DTYPES, "int64"):
        raise TypeError(f"cannot cast to {dtype!r}")
    return Call("cast", (as_expr(x),), dtype)
