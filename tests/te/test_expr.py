"""``te.expr.structure``: equal for a UDF traced again on another graph, different wherever the lowered code
would differ."""

from __future__ import annotations

from featgraph import te
from featgraph.te.expr import Var, structure

SRC, DST, EID = Var("src", "src"), Var("dst", "dst"), Var("eid", "eid")


def gat_message(rows: int, heads: int = 4, d: int = 8, w_rows: int = 3):
    """A GAT-like message: a dense weight, vertex data, a per-head reduction shared by two uses."""
    x = te.placeholder((rows, heads, d), name="X")
    score = te.placeholder((rows, heads), name="S")
    w = te.placeholder((w_rows, d), name="W")
    k = te.reduce_axis((0, d), name="k")

    def body(h, i):
        dot = te.sum(x[SRC, h, k] * w[0, k], axis=k)
        return te.exp(score[DST, h] - dot) * x[SRC, h, i] + dot

    return te.compute((heads, d), body)


def key(op):
    return structure(op)[0]


def test_a_trace_again_on_other_row_counts_is_described_alike():
    first = gat_message(rows=10)
    for _ in range(5):
        te.reduce_axis((0, 2), name="k")  # moves the process-wide counter the reduce variable is named by
    second = gat_message(rows=77_777)
    assert key(first) == key(second)
    assert hash(key(first)) == hash(key(second))
    names = structure(second)[1]
    reduce_name = second.reduce_axis[0].name
    assert names[reduce_name] == "k#0" and reduce_name != "rk_k_0"  # label and order of use, no counter


def test_every_difference_the_lowering_sees_changes_the_description():
    base = key(gat_message(rows=10))
    assert key(gat_message(rows=10, d=9)) != base  # feature size
    assert key(gat_message(rows=10, heads=3)) != base
    assert key(gat_message(rows=10, w_rows=4)) != base  # a dense placeholder keeps its first dimension
    x = te.placeholder((5, 3), name="X")
    y = te.placeholder((5, 3), name="Y")
    half = te.placeholder((5, 3), dtype="bfloat16", name="X")

    def described(fn, shape=(3,)):
        return key(te.compute(shape, fn))

    alike = described(lambda i: x[SRC, i] * 2)
    assert described(lambda i: x[SRC, i] * 2) == alike
    assert described(lambda i: x[SRC, i] * 2.0) != alike  # an int and a float constant lower differently
    assert described(lambda i: y[SRC, i] * 2) != alike  # placeholder names are the kernel's arguments
    assert described(lambda i: half[SRC, i] * 2) != alike
    assert described(lambda i: x[DST, i] * 2) != alike
    assert described(lambda i: 2 * x[SRC, i]) != alike
    assert described(lambda i: x[SRC, i] - 2) != alike


def test_a_shared_node_is_told_from_two_equal_ones():
    """Lowering computes a reduction object once however often it is used; two equal reductions twice."""
    x = te.placeholder((5, 6), name="X")

    def shared(i):
        k = te.reduce_axis((0, 6), name="k")
        total = te.sum(x[SRC, k], axis=k)
        return total * total

    def repeated(i):
        k, j = te.reduce_axis((0, 6), name="k"), te.reduce_axis((0, 6), name="k")
        return te.sum(x[SRC, k], axis=k) * te.sum(x[SRC, j], axis=j)

    assert key(te.compute((1,), shared)) != key(te.compute((1,), repeated))
    assert key(te.compute((1,), shared)) == key(te.compute((1,), shared))
