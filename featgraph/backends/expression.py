"""The walk over a UDF's expression tree that both backends share; each supplies its syntax.

An expression lowers two ways: as an integer *index* (tensor subscripts: graph variables, axes, integer
arithmetic with Python's floor division and modulo, int64 loads) or as a *value* of the compute type
(arithmetic, comparisons as 0/1, intrinsics).
The tree walk and its rules (which nodes may index, how floor division and modulo of values are formed,
how integer equality compares ids exactly) live here once; a backend's subclass says how a constant, a
variable, a load, a cast to the compute type, a 0/1 test, a select, a pairwise max/min, a cast and the
dropout hash are written in its language.
"""

from __future__ import annotations

import re

from ..te.expr import BinOp, Call, ComputeOp, Const, Expr, Load, Reduce, Var, is_integer

# integer floor division and modulo with Python's signs (C++ and Triton round toward zero); every backend's
# generated code defines these two functions
INTEGER_DIVISION = {"//": "fg_floordiv", "%": "fg_floormod"}


class ExpressionLowering:
    """Shared tree walk; subclasses set ``FLOOR``, ``UNARY`` and implement the hooks."""

    FLOOR: str  # the floor function of values, e.g. "std::floor"
    UNARY: dict[str, str]  # intrinsic -> format of its one argument ``{0}``

    def index(self, e: Expr) -> str:
        """``e`` as an integer expression (a subscript)."""
        if isinstance(e, Load) and e.tensor.dtype == "int64":
            return self.load(e)
        if isinstance(e, Const):
            if not e.is_int:
                raise TypeError(f"non-integer constant {e.value} used as an index")
            return str(e.value)
        if isinstance(e, Var):
            return self.variable(e)
        if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
            return f"({self.index(e.a)} {e.op} {self.index(e.b)})"
        if isinstance(e, BinOp) and e.op in ("//", "%"):  # Python's rounding: each backend defines both
            return f"{INTEGER_DIVISION[e.op]}({self.index(e.a)}, {self.index(e.b)})"
        raise TypeError(f"unsupported index expression {type(e).__name__}: indices must be integer arithmetic")

    def value(self, e: Expr) -> str:
        """``e`` as an expression of the compute type."""
        if isinstance(e, Const):
            return self.constant(e.value)
        if isinstance(e, Var):
            return self.as_value(self.index(e))
        if isinstance(e, Load):
            return self.as_value(self.load(e)) if e.tensor.dtype == "int64" else self.load(e)
        if isinstance(e, Reduce):
            return self.reduction_value(e)
        if isinstance(e, BinOp):
            a, b = self.value(e.a), self.value(e.b)
            if e.op in ("+", "-", "*", "/"):
                return f"({a} {e.op} {b})"
            if e.op == "//":
                return f"{self.FLOOR}({a} / {b})"
            if e.op == "%":
                return f"({a} - {b} * {self.FLOOR}({a} / {b}))"
            return self.truth(f"{a} {e.op} {b}")  # comparison as 0/1
        if isinstance(e, Call):
            return self.call(e)
        raise TypeError(f"cannot lower {type(e).__name__}")

    def call(self, e: Call) -> str:
        if e.fn == "eq" and all(is_integer(a) for a in e.args):  # ids compare exactly, as integers
            return self.truth(f"{self.index(e.args[0])} == {self.index(e.args[1])}")
        if e.fn == "keep":
            return self.keep(e)
        args = [self.value(a) for a in e.args]
        if e.fn in self.UNARY:
            return self.UNARY[e.fn].format(args[0])
        if e.fn in ("max", "min"):
            return self.pairwise(e.fn, args[0], args[1])
        if e.fn == "where":
            return self.select(args[0], args[1], args[2])
        if e.fn == "eq":
            return self.truth(f"{args[0]} == {args[1]}")
        if e.fn == "cast":
            return self.cast(e.dtype, args[0])
        raise TypeError(f"unknown intrinsic {e.fn!r}")

    # the syntax of one backend
    def variable(self, e: Var) -> str:
        raise NotImplementedError

    def load(self, e: Load) -> str:
        raise NotImplementedError

    def reduction_value(self, e: Reduce) -> str:
        raise NotImplementedError

    def constant(self, value: float) -> str:
        raise NotImplementedError

    def as_value(self, integer: str) -> str:
        raise NotImplementedError

    def truth(self, condition: str) -> str:
        raise NotImplementedError

    def pairwise(self, fn: str, a: str, b: str) -> str:
        raise NotImplementedError

    def select(self, condition: str, a: str, b: str) -> str:
        raise NotImplementedError

    def cast(self, dtype: str, x: str) -> str:
        raise NotImplementedError

    def keep(self, e: Call) -> str:
        raise NotImplementedError


def number_reduce_variables(text: str, op: ComputeOp) -> str:
    """``text`` with ``op``'s reduce variables numbered by first use in it, not by the process-wide counter
    that keeps them apart in expressions, so identical UDFs give identical sources: a UDF traced again (for
    each mini-batch's graph, or in another process) hits the kernel cache and the tuner's store. Forms the
    lowering derives from a variable's name (``rk_k_7_o``, ``_rk_k_7_r0``) are renamed with it."""
    labels = {axis.name: axis.label for axis in op.reduce_axis}
    if not labels:
        return text
    numbers: dict[str, int] = {}

    def renumber(match: re.Match) -> str:
        name = match.group(0)
        return f"rk_{labels[name]}_{numbers.setdefault(name, len(numbers))}"

    names = sorted(labels, key=len, reverse=True)  # the longest first: rk_k_1_5 (named "k_1") before rk_k_1
    return re.sub(r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, names)) + r")(?!\d)", renumber, text)
