"""The shared expression walk, checked through a lowering to Python that is evaluated and compared with
the same arithmetic done by hand; the C++ and Triton lowerings are checked end to end by their kernels."""

from __future__ import annotations

import math
import re

import pytest
import torch

from featgraph import Graph, sddmm, te
from featgraph.backends.cpu import templates as cpu_templates
from featgraph.backends.expression import ExpressionLowering, number_reduce_variables
from featgraph.backends.gpu import templates as gpu_templates
from featgraph.backends.source import lower
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


def _sources_of_a_dot_kernel(num_nodes: int, d: int) -> tuple[str, str, object]:
    """The C++ and Triton sources of an SDDMM with two long reductions (split into vector chunks), one axis
    named with an underscore and a digit, traced anew on a graph of ``num_nodes`` vertices and lowered
    afresh (not taken from the remembered sources)."""
    g = Graph(torch.arange(num_nodes), torch.arange(num_nodes).roll(1), num_nodes)
    x = te.placeholder((num_nodes, d), name="X")

    def edgefunc(s, t, e):
        k, j = te.reduce_axis((0, d), name="k"), te.reduce_axis((0, d), name="k_1")
        return te.compute((1,), lambda i: te.sum(x[s, k] * x[t, k], axis=k) + te.sum(x[s, j], axis=j))

    kernel = sddmm(g, edgefunc)
    return lower(kernel.spec, cpu_templates), lower(kernel.spec, gpu_templates), kernel


def test_reduce_variables_are_numbered_by_use_so_every_trace_gives_one_source():
    """A mini-batch traces its kernels anew on each block's graph: the process-wide counter behind reduce
    variables' names (and the forms the lowering derives from them, ``rk_k_7_o``) must not reach the source,
    else each batch compiles its kernels again."""
    first_cpu, first_gpu, first = _sources_of_a_dot_kernel(5, 47)
    for _ in range(3):
        te.reduce_axis((0, 2), name="k")  # moves the counter on
    second_cpu, second_gpu, second = _sources_of_a_dot_kernel(9, 47)
    assert first_cpu == second_cpu and first_gpu == second_gpu
    assert first._run is second._run  # one compiled library
    assert "rk_k_0_o" in first_cpu and "rk_k_1_1" in first_cpu  # split chunks renamed with their variable
    assert re.findall(r"rk_\w+", first_cpu) == re.findall(r"rk_\w+", number_reduce_variables(first_cpu, first.spec.op))
    x = torch.randn(9, 47)
    src, dst = second.graph.coo()
    expected = ((x[src] * x[dst]).sum(1) + x[src].sum(1)).unsqueeze(1)
    torch.testing.assert_close(second(X=x), expected)
