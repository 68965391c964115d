"""Subscript bounds of a UDF: the range of every integer expression, checked against what it indexes.

Generated kernels do not test subscripts per element, so a kernel is only built when each subscript
provably stays inside its placeholder: ranges follow from the axes' extents, the graph's sizes and
constants by interval arithmetic (Python's floor division and modulo, as the backends emit them). A
subscript that reads an int64 placeholder (a gather through ids) is checked when the kernel is called,
with that tensor's actual minimum and maximum. An integer division or modulo by an expression that can be
0 is refused too. Negative subscripts are out of range: Python's counting from the end does not apply.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .expr import GRAPH_KINDS, BinOp, ComputeOp, Const, Expr, Load, Var, is_integer, per_op

Range = tuple[int, int]  # inclusive bounds
VariableRange = Callable[[Var], Range | None]
DataRange = Callable[[Load], Range | None]


class DataDependent(Exception):
    """The range needs the values of an int64 placeholder, not known before the call."""


@dataclass(frozen=True)
class Subscript:
    """One index position of one load: ``load.indices[dim]``."""

    load: Load
    dim: int

    @property
    def expr(self) -> Expr:
        return self.load.indices[self.dim]

    def describe(self) -> str:
        p = self.load.tensor
        return f"placeholder {p.name!r} (shape {p.shape}), dimension {self.dim}"


def _combine(op: str, a: Range, b: Range, expr: Expr) -> Range:
    if op in ("+", "-"):
        return (a[0] + b[0], a[1] + b[1]) if op == "+" else (a[0] - b[1], a[1] - b[0])
    if op == "*":
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)
    if b[0] <= 0 <= b[1]:
        raise ZeroDivisionError(
            f"integer {'division' if op == '//' else 'modulo'} by an expression that can be 0 "
            f"(its range is [{b[0]}, {b[1]}]): {describe(expr)}"
        )
    if op == "//":
        corners = [x // y for x in a for y in b]
        return min(corners), max(corners)
    # Python's modulo takes the divisor's sign; a dividend already inside [0, divisor) is itself
    if b[0] > 0:
        return a if a[0] >= 0 and a[1] < b[0] else (0, b[1] - 1)
    return a if a[1] <= 0 and a[0] > b[1] else (b[0] + 1, 0)


def integer_range(e: Expr, variable: VariableRange, data: DataRange) -> Range | None:
    """Inclusive bounds of the integer expression ``e``; None where a variable it uses takes no value at all
    (no edge, so the expression is never evaluated). ``variable`` gives a loop or graph variable's range,
    ``data`` an int64 load's (raising ``DataDependent`` before the call)."""
    if isinstance(e, Const):
        return (int(e.value), int(e.value))
    if isinstance(e, Var):
        return variable(e)
    if isinstance(e, Load):
        return data(e)
    if isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%"):
        a, b = integer_range(e.a, variable, data), integer_range(e.b, variable, data)
        return None if a is None or b is None else _combine(e.op, a, b, e)
    raise TypeError(f"not integer arithmetic: {describe(e)}")


def describe(e: Expr) -> str:
    """``e`` written as te source, with the names users gave their axes."""
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, Var):
        return e.label
    if isinstance(e, Load):
        return f"{e.tensor.name}[{', '.join(describe(i) for i in e.indices)}]"
    if isinstance(e, BinOp):
        return f"({describe(e.a)} {e.op} {describe(e.b)})"
    return type(e).__name__


def subscripts(op: ComputeOp) -> Iterator[Subscript]:
    """Every index position of every load in the UDF, except a bare graph variable in the first position
    (vertex and edge rows, whose count the kernel checks against the graph)."""
    seen: set[int] = set()
    for node in op.nodes:
        if not isinstance(node, Load) or id(node) in seen:
            continue
        seen.add(id(node))
        for dim, index in enumerate(node.indices):
            if dim == 0 and isinstance(index, Var) and index.kind in GRAPH_KINDS:
                continue
            yield Subscript(node, dim)


def divisions(op: ComputeOp) -> Iterator[BinOp]:
    """Integer divisions and modulos anywhere in the UDF (subscripts, dropout elements, id comparisons)."""
    for node in op.nodes:
        if isinstance(node, BinOp) and node.op in ("//", "%") and is_integer(node):
            yield node


@per_op
def checked_items(op: ComputeOp) -> tuple[Subscript | BinOp, ...]:
    """The divisions and subscripts whose ranges a graph's sizes (and int64 data) decide, each subscript
    checked to be integer arithmetic."""
    items = (*divisions(op), *subscripts(op))
    for item in items:
        if isinstance(item, Subscript) and not is_integer(item.expr):
            raise TypeError(
                f"{item.describe()}: the subscript {describe(item.expr)} is not integer arithmetic "
                "(integer constants, axes, src/dst/eid, int64 loads and + - * // %)"
            )
    return items


class SubscriptCheck:
    """The subscript and divisor checks of one UDF on a graph of ``num_src`` / ``num_dst`` vertices and
    ``num_edges`` edges: those known from shapes run on construction, ``check_data`` runs the rest (the
    ones that read int64 placeholders) with the values' range."""

    def __init__(self, op: ComputeOp, num_src: int, num_dst: int, num_edges: int) -> None:
        # a UDF is evaluated per edge: without edges its graph variables take no value at all
        self._sizes = {"src": num_src, "dst": num_dst, "eid": num_edges} if num_edges else {}
        self.deferred: list[Subscript | BinOp] = []
        for item in checked_items(op):
            try:
                self._check(item, _unknown_data)
            except DataDependent:
                self.deferred.append(item)
        # the int64 placeholders whose values the deferred checks read
        self.data_placeholders = {
            node.tensor.name
            for item in self.deferred
            for node in (item.expr if isinstance(item, Subscript) else item).walk()
            if isinstance(node, Load) and node.tensor.dtype == "int64"
        }

    def _variable(self, v: Var) -> Range | None:
        if v.kind == "axis":
            return (0, v.extent - 1)
        if v.kind == "reduce":
            return (v.start, v.start + v.extent - 1)
        size = self._sizes.get(v.kind, 0)
        return (0, size - 1) if size > 0 else None

    def _check(self, item: Subscript | BinOp, data: DataRange) -> None:
        if isinstance(item, BinOp):  # a division: computing its range checks the divisor
            integer_range(item, self._variable, data)
            return
        found = integer_range(item.expr, self._variable, data)
        extent = item.load.tensor.shape[item.dim]
        if found is not None and (found[0] < 0 or found[1] >= extent):
            hint = " (negative subscripts do not count from the end)" if found[0] < 0 else ""
            raise IndexError(
                f"{item.describe()}: the subscript {describe(item.expr)} takes values in "
                f"[{found[0]}, {found[1]}], outside [0, {extent}){hint}"
            )

    def check_data(self, ranges: dict[str, Range | None]) -> None:
        """Run the deferred checks, given each int64 placeholder's (min, max) (None: it is empty)."""
        for item in self.deferred:
            self._check(item, lambda load: ranges[load.tensor.name])


def _unknown_data(load: Load) -> Range:
    raise DataDependent
