"""Subscript bounds: out-of-range subscripts and zero divisors are refused before any kernel runs, gathers
through int64 ids are checked against the ids' values, and integer // and % round as Python's do."""

from __future__ import annotations

import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.te.bounds import SubscriptCheck, integer_range
from featgraph.te.expr import Var

from ..conftest import random_edges

SRC, DST, EID = Var("src", "src"), Var("dst", "dst"), Var("eid", "eid")
N, E = 9, 30


@pytest.fixture
def graph() -> fg.Graph:
    src, dst = random_edges(N, E, seed=3)
    return fg.Graph(src, dst, N)


@pytest.fixture(params=["cpu", "gpu"])
def target(request) -> str:
    """Both backends; the GPU's through Triton's interpreter on CPU tensors."""
    if request.param == "gpu":
        request.getfixturevalue("interpreted_gpu")
    return request.param


def reference_sum(g: fg.Graph, message) -> torch.Tensor:
    """Per destination, the sum over in-edges of ``message(s, v, e)`` (a dense row), by a Python loop."""
    src, dst = g.coo()
    rows = [message(int(s), int(v), e) for e, (s, v) in enumerate(zip(src, dst, strict=True))]
    out = torch.zeros(g.num_nodes, *rows[0].shape, dtype=rows[0].dtype)
    for row, v in zip(rows, dst, strict=True):
        out[v] += row
    return out


def ranges(**extents: int):
    return lambda v: (0, extents[v.name] - 1)


def test_interval_arithmetic_follows_python():
    i, j = Var("i", "axis", 5), Var("j", "axis", 5)
    assert integer_range(i * 2 - j, ranges(i=5, j=5), None) == (-4, 8)
    assert integer_range((i - 3) // 2, ranges(i=5), None) == (-2, 0)
    assert integer_range((i - 3) % 4, ranges(i=5), None) == (0, 3)
    assert integer_range(i % 7, ranges(i=5), None) == (0, 4)  # already inside [0, 7): itself
    assert integer_range(i % -3, ranges(i=5), None) == (-2, 0)


@pytest.mark.parametrize(
    ("udf", "match"),
    [
        (lambda X: lambda s, d, e: te.compute((6,), lambda i: X[s, i]), r"subscript i takes values in \[0, 5\]"),
        (lambda X: lambda s, d, e: te.compute((1,), lambda i: X[s, 7]), r"\[7, 7\], outside \[0, 3\)"),
        (lambda X: lambda s, d, e: te.compute((1,), lambda i: X[s, -1]), "do not count from the end"),
        (lambda X: lambda s, d, e: te.compute((3,), lambda i: X[s + 1, i]), r"dimension 0: .*\[1, 9\]"),
        (lambda X: lambda s, d, e: te.compute((3,), lambda i: X[d, 2 - i * 2]), r"\[-2, 2\]"),
    ],
    ids=["wide-axis", "constant", "negative", "shifted-vertex", "reversed"],
)
def test_out_of_range_subscripts_are_refused_when_the_kernel_is_built(graph, udf, match, target):
    X = te.placeholder((N, 3), name="X")
    with pytest.raises(IndexError, match=f"placeholder 'X' .*{match}"):
        fg.spmm(graph, udf(X), "sum", target=target)


@pytest.mark.parametrize(
    "index",
    [lambda i: i // 0, lambda i: i % 0, lambda i: 2 // (i - 1), lambda i: 5 % (i - 2)],
    ids=["by-zero", "modulo-zero", "divisor-range", "modulo-range"],
)
def test_integer_division_by_what_can_be_zero_is_refused(graph, index):
    X = te.placeholder((N, 4), name="X")
    with pytest.raises(ZeroDivisionError, match="can be 0"):
        fg.spmm(graph, lambda s, d, e: te.compute((4,), lambda i: X[s, index(i)]), "sum")


def test_a_divisor_inside_a_dropout_element_is_checked_too(graph):
    X = te.placeholder((N, 4), name="X")
    seed = te.placeholder((1,), "int64", "SEED")
    with pytest.raises(ZeroDivisionError, match="modulo"):
        fg.sddmm(graph, lambda s, d, e: te.compute((4,), lambda i: X[s, i] * te.keep(seed[0], e % (i - 1), 0.5)))


def test_floor_division_and_modulo_of_negative_subscripts_round_as_python(graph, target):
    X = te.placeholder((N, 5), dtype="float64", name="X")

    def udf(s, d, e):  # (i - 3) // 2 + 2 and (i - 7) % 5 reach below zero before they are shifted back
        return te.compute((5,), lambda i: X[s, (i - 3) // 2 + 2] + 10 * X[d, (i - 7) % 5])

    x = torch.randn(N, 5, dtype=torch.float64)
    got = fg.spmm(graph, udf, "sum", target=target)(X=x)
    cols = range(5)
    want = reference_sum(
        graph, lambda s, v, e: torch.stack([x[s, (i - 3) // 2 + 2] + 10 * x[v, (i - 7) % 5] for i in cols])
    )
    torch.testing.assert_close(got, want)


def test_a_gather_through_ids_is_checked_against_the_ids(graph, target):
    X = te.placeholder((N, 6), dtype="float64", name="X")
    PICK = te.placeholder((3,), dtype="int64", name="PICK")
    kernel = fg.spmm(graph, lambda s, d, e: te.compute((3,), lambda i: X[s, PICK[i]]), "sum", target=target)
    x = torch.randn(N, 6, dtype=torch.float64)
    ids = torch.tensor([5, 0, 5])
    want = reference_sum(graph, lambda s, v, e: x[s, ids])
    torch.testing.assert_close(kernel(X=x, PICK=ids), want)
    bad = ids.clone()
    bad[1] = 6
    with pytest.raises(IndexError, match=r"subscript PICK\[i\] takes values in \[5, 6\], outside \[0, 6\)"):
        kernel(X=x, PICK=bad)
    bad[1] = -1
    with pytest.raises(IndexError, match="do not count from the end"):
        kernel(X=x, PICK=bad)


def test_no_edge_means_no_subscript_is_evaluated():
    empty = fg.Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 4)
    X = te.placeholder((4, 3), name="X")
    out = fg.spmm(empty, lambda s, d, e: te.compute((3,), lambda i: X[s + 1, i]), "sum")(X=torch.randn(4, 3))
    assert torch.equal(out, torch.zeros(4, 3))
    assert not SubscriptCheck(te.compute((1,), lambda i: X[SRC + 5, i]), 0, 0, 0).deferred


def test_subscripts_must_be_integer_arithmetic(graph):
    X = te.placeholder((N, 4), name="X")
    with pytest.raises(TypeError, match=r"subscript \(i / 2\) is not integer arithmetic"):
        fg.spmm(graph, lambda s, d, e: te.compute((4,), lambda i: X[s, i / 2]), "sum")


def test_axes_must_be_bound_where_they_are_used():
    X = te.placeholder((N, 4), name="X")
    k = te.reduce_axis(4, name="k")
    with pytest.raises(ValueError, match="reduce axis 'k' is used outside a te.sum"):
        te.compute((4,), lambda i: X[SRC, i] * X[DST, k])
    other = te.compute((4,), lambda j: X[SRC, j])
    with pytest.raises(ValueError, match="axis 'j' belongs to another te.compute"):
        te.compute((4,), lambda i: X[SRC, i] + X[DST, other.axis[0]])
