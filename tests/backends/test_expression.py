"""The shared expression walk, checked through a lowering to Python that is evaluated and compared with
the same arithmetic done by hand; the C++ and Triton lowerings are checked end to end by their kernels."""

from __future__ import annotations

import math

import pytest

from featgraph import te
from featgraph.backends.expression import ExpressionLowering
from featgraph.te.expr import Call, Const, Load, Var


class PythonLowering(ExpressionLowering):
    """Python syntax: variables by name, loads from dicts of lists, values as floats."""

    FLOOR = "math.floor"
    UNARY = {"exp": "math.exp({0})", "abs": "abs({0})"}

    def variable(self, e: Var) -> str:
        return e.name

    def load(self, e: Load) -> str:
        return f"{e.tensor.name}[{self.index(e.indices[0])}]"

    def constant(self, value: float) -> str:
        return repr(float(value))

    def as_value(self, integer: str) -> str:
        return f"float({integer})"

    def truth(self, condition: str) -> str:
        return f"float({condition})"

    def pairwise(self, fn: str, a: str, b: str) -> str:
        return f"{fn}({a}, {b})"

    def select(self, condition: str, a: str, b: str) -> str:
        return f"(({a}) if ({condition}) != 0 else ({b}))"

    def cast(self, dtype: str, x: str) -> str:
        return f"float(int({x}))" if dtype == "int64" else x


def evaluate(expr, **env) -> float:
    python_division = {"fg_floordiv": lambda a, b: a // b, "fg_floormod": lambda a, b: a % b}
    return eval(PythonLowering().value(expr), {"math": math, **python_division, **env})  # noqa: S307 - our own text


def test_values_follow_the_languages_rules():
    a, b = Var("a", "axis", 10), Var("b", "axis", 10)
    X = te.placeholder((10,), name="X")
    expr = te.where(X[a] > 1.5, te.exp(X[b]) % 2.0, te.max(a // 3, -(X[a] * 2)))
    for x0, x1 in [(2.0, 0.3), (1.0, -4.0)]:
        want = math.exp(x1) - 2.0 * math.floor(math.exp(x1) / 2.0) if x0 > 1.5 else max(7 // 3, -(x0 * 2))
        xs = [x0 if i == 7 else x1 for i in range(10)]  # X[a] = x0, X[b] = x1
        assert evaluate(expr, a=7, b=1, X=xs) == pytest.approx(want)


def test_integer_equality_compares_ids_exactly_and_indices_stay_integer():
    i, j = Var("i", "axis", 4), Var("j", "axis", 4)
    assert evaluate(te.equal(i, j + 1), i=3, j=2) == 1.0
    assert evaluate(te.equal(i, j), i=3, j=2) == 0.0
    assert PythonLowering().index(i // 2 + j % 3) == "(fg_floordiv(i, 2) + fg_floormod(j, 3))"


def test_bad_trees_say_what_is_wrong():
    lowering = PythonLowering()
    with pytest.raises(TypeError, match="non-integer constant 1.5 used as an index"):
        lowering.index(Const(1.5))
    with pytest.raises(TypeError, match="unknown intrinsic 'erf'"):
        lowering.value(Call("erf", (Const(1.0),)))
    with pytest.raises(TypeError, match="indices must be integer arithmetic"):
        lowering.index(Call("exp", (Const(1.0),)))
