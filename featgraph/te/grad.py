"""Symbolic differentiation of expression trees.

``diff(expr, site)`` is the derivative of ``expr`` with respect to the value loaded at one ``Load`` node.
A sum-reduction whose axis indexes that load loses the axis (each value of it touches a different
element), so the derivative keeps that axis free for the caller to bind to the gradient's own axes.
Bound variables are respected by ``substitute``, so a reduction reused inside a derivative (relu'(s) * ds)
keeps its own loop variable while the freed copy is renamed.
"""

from __future__ import annotations

from collections.abc import Callable

from .expr import BinOp, Call, Const, Expr, Load, Reduce, Var

ZERO, ONE = Const(0), Const(1)


def is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def add(a: Expr, b: Expr) -> Expr:
    return b if is_zero(a) else a if is_zero(b) else BinOp("+", a, b)


def sub(a: Expr, b: Expr) -> Expr:
    return a if is_zero(b) else BinOp("-", a, b)


def mul(a: Expr, b: Expr) -> Expr:
    if is_zero(a) or is_zero(b):
        return ZERO
    if isinstance(a, Const) and a.value == 1:
        return b
    if isinstance(b, Const) and b.value == 1:
        return a
    return BinOp("*", a, b)


def where(cond: Expr, a: Expr, b: Expr) -> Expr:
    return ZERO if is_zero(a) and is_zero(b) else Call("where", (cond, a, b))


def substitute(e: Expr, replace: Callable[[Var], Expr | None]) -> Expr:
    """Rebuild ``e`` with every free variable ``v`` for which ``replace(v)`` is not None replaced."""
    if isinstance(e, Var):
        new = replace(e)
        return e if new is None else new
    if isinstance(e, Const):
        return e
    if isinstance(e, Load):
        return Load(e.tensor, tuple(substitute(i, replace) for i in e.indices))
    if isinstance(e, BinOp):
        return BinOp(e.op, substitute(e.a, replace), substitute(e.b, replace))
    if isinstance(e, Call):
        return Call(e.fn, tuple(substitute(a, replace) for a in e.args), e.dtype)
    if isinstance(e, Reduce):
        bound = e.axes
        inner = lambda v: None if any(v is a for a in bound) else replace(v)  # noqa: E731
        return Reduce(e.op, substitute(e.body, inner), e.axes)
    raise TypeError(f"cannot substitute in {type(e).__name__}")


def contains(e: Expr, node: Expr) -> bool:
    return any(n is node for n in e.walk())


def diff(e: Expr, site: Load) -> Expr:
    """d e / d (value at ``site``)."""
    if not contains(e, site):
        return ZERO
    if e is site:
        return ONE
    if isinstance(e, BinOp):
        da, db = diff(e.a, site), diff(e.b, site)
        if e.op == "+":
            return add(da, db)
        if e.op == "-":
            return sub(da, db)
        if e.op == "*":
            return add(mul(da, e.b), mul(e.a, db))
        if e.op == "/":
            return sub(mul(da, BinOp("/", ONE, e.b)), mul(db, BinOp("/", e.a, BinOp("*", e.b, e.b))))
        return ZERO  # comparisons, floor division and modulo are piecewise constant
    if isinstance(e, Call):
        return _diff_call(e, site)
    if isinstance(e, Reduce):
        if e.op != "sum":
            raise NotImplementedError("gradients through a max/min reduction inside a UDF are not supported")
        used = {id(v) for i in site.indices for v in i.walk() if isinstance(v, Var)}
        remaining = tuple(a for a in e.axes if id(a) not in used)
        body = diff(e.body, site)
        return Reduce("sum", body, remaining) if remaining and not is_zero(body) else body
    if isinstance(e, Load):
        return ZERO  # indices are integer arithmetic, constant for differentiation
    raise TypeError(f"cannot differentiate {type(e).__name__}")


def _diff_call(e: Call, site: Load) -> Expr:
    x = e.args[0]
    dx = diff(x, site) if e.fn not in ("where",) else ZERO
    if e.fn == "exp":
        return mul(dx, e)
    if e.fn == "log":
        return mul(dx, BinOp("/", ONE, x))
    if e.fn == "sqrt":
        return mul(dx, BinOp("/", Const(0.5), e))
    if e.fn == "tanh":
        return mul(dx, BinOp("-", ONE, BinOp("*", e, e)))
    if e.fn == "sigmoid":
        return mul(dx, BinOp("*", e, BinOp("-", ONE, e)))
    if e.fn == "abs":
        return where(BinOp(">", x, ZERO), dx, where(BinOp("<", x, ZERO), BinOp("-", ZERO, dx), ZERO))
    if e.fn in ("max", "min"):
        b = e.args[1]
        wins = BinOp(">=" if e.fn == "max" else "<=", x, b)
        return where(wins, dx, diff(b, site))
    if e.fn == "where":
        return where(e.args[0], diff(e.args[1], site), diff(e.args[2], site))
    if e.fn == "cast":
        return dx  # straight through: the rounding has derivative 1 almost everywhere
    if e.fn in ("eq", "keep"):
        return ZERO  # piecewise constant: a comparison, a dropout mask
    raise NotImplementedError(f"no derivative rule for {e.fn!r}")
