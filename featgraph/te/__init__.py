"""featgraph's tensor-expression language: placeholders, ``compute``, reduce axes, reducers, elementwise math.

A UDF ``(src, dst, eid) -> te.compute(...)`` indexes placeholders by the graph variables and its own axes::

    XV = te.placeholder((n, d), name="XV")
    def msgfunc(src, dst, eid):
        return te.compute((d,), lambda i: XV[src, i])
"""

from .api import (
    abs,
    cast,
    compute,
    equal,
    exp,
    keep,
    log,
    max,
    min,
    placeholder,
    reduce_axis,
    sigmoid,
    sqrt,
    sum,
    tanh,
    where,
)
from .expr import BinOp, Call, ComputeOp, Const, Expr, Load, Placeholder, Reduce, Var

__all__ = [
    "BinOp", "Call", "ComputeOp", "Const", "Expr", "Load", "Placeholder", "Reduce", "Var",
    "abs", "cast", "compute", "equal", "exp", "keep", "log", "max", "min", "placeholder", "reduce_axis",
    "sigmoid", "sqrt", "sum", "tanh", "where",
]  # fmt: skip
