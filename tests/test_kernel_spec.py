"""The kernel description's per-op analyses: placeholders' shapes on a graph, and the numbers standing for
traced structures in the source cache's keys."""

import pytest

from featgraph import kernel_spec, te
from featgraph.templates.kernel import trace_udf


def _udf(width: int):
    def udf(s, t, e):
        x, w = te.placeholder((None, width), "float32", "X"), te.placeholder((None,), "float32", "W")
        return te.compute((width,), lambda i: x[s, i] * w[e])

    return udf


def test_one_udf_traced_again_keeps_its_number_and_another_gets_its_own():
    first, again, other = trace_udf(_udf(4)), trace_udf(_udf(4)), trace_udf(_udf(5))
    assert first is not again
    assert kernel_spec.structure_number(first) == kernel_spec.structure_number(again)
    assert kernel_spec.structure_number(other) != kernel_spec.structure_number(first)


def test_an_evicted_structure_comes_back_under_a_number_never_given_before(monkeypatch):
    monkeypatch.setattr(kernel_spec._structures, "size", 1)
    given = [kernel_spec.structure_number(trace_udf(_udf(width))) for width in (6, 7, 6)]
    assert len(set(given)) == 3  # width 6 was evicted by 7: a fresh number, not 7's nor its old one


def test_placeholders_without_rows_take_the_graphs_counts():
    op = trace_udf(_udf(3))
    x, w = op.placeholders[1], op.placeholders[0]
    assert (x.name, w.name) == ("X", "W")
    assert kernel_spec.placeholder_shape(op, x, (10, 4, 25)) == (10, 3)  # X[src]: the sources
    assert kernel_spec.placeholder_shape(op, w, (10, 4, 25)) == (25,)  # W[eid]: the edges


def test_a_placeholder_indexed_by_both_sides_needs_them_equal():
    def both(s, t, e):
        x = te.placeholder((None, 2), "float32", "X")
        return te.compute((2,), lambda i: x[s, i] + x[t, i])

    op = trace_udf(both)
    assert kernel_spec.placeholder_shape(op, op.placeholders[0], (6, 6, 9)) == (6, 2)
    with pytest.raises(ValueError, match="'X' .*both src and dst, which number 6 and 3"):
        kernel_spec.placeholder_shape(op, op.placeholders[0], (6, 3, 9))
