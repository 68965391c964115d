import pytest

from featgraph import te
from featgraph.backends.cpu.codegen import Emitter, Tile, free_vars, message_block, reduces_inner_first, tile_flat
from featgraph.schedule import Schedule
from featgraph.te.expr import Var

SRC, DST = Var("src", "src"), Var("dst", "dst")


def test_loads_flatten_row_major_with_constant_strides():
    X = te.placeholder((10, 3, 5), name="X")
    i = Var("ax_i", "axis", 5)
    code = Emitter({}).value(X[SRC, 2, i])
    assert code == "P_X[((s) * 3 + 2) * 5 + ax_i]"


def test_index_expressions_must_be_integer_arithmetic():
    X = te.placeholder((10, 4), name="X")
    with pytest.raises(TypeError, match="non-integer constant"):
        Emitter({}).value(X[SRC, 1.5])
    with pytest.raises(TypeError, match="integer arithmetic"):
        Emitter({}).value(X[SRC, te.exp(1)])


def test_nested_reductions_are_found_innermost_first_with_their_free_variables():
    X = te.placeholder((10, 4), name="X")
    k, j = te.reduce_axis(4), te.reduce_axis(4)
    inner = te.sum(X[SRC, k] * X[DST, j], axis=k)
    outer = te.sum(inner * X[SRC, j], axis=j)
    assert [(r is inner, nested) for r, nested in reduces_inner_first(outer)] == [(True, True), (False, False)]
    assert free_vars(inner) == [j] and free_vars(outer) == []


def test_split_and_vectorize_reach_the_loop_nest():
    X = te.placeholder((10, 12), name="X")
    op = te.compute((12,), lambda i: X[SRC, i] + X[DST, i])
    s = Schedule(op).split(op.axis[0], 4).vectorize(op.axis[0])
    code = "\n".join(message_block(op, s, Tile(0, 12), lambda f, g, x: f"acc[{f}] += {x};"))
    assert "ax_i_o < 3" in code and "ax_i_i < 4" in code and "#pragma omp simd" in code


def test_tiles_index_their_local_buffer_from_zero():
    op = te.compute((2, 8), lambda h, i: h + i)
    assert tile_flat(op, Tile(4, 4)) == "(ax_h) * 4 + (ax_i - 4)"


def test_values_the_inner_loop_does_not_change_are_computed_once_outside_it():
    """A per-head weight times per-feature data: the weight is one SIMD loop over the heads, before the
    heads x features loops; a per-edge scalar is one statement."""
    A, F = te.placeholder((10, 4), name="A"), te.placeholder((10, 4, 8), name="F")
    C = te.placeholder((10,), name="C")
    op = te.compute((4, 8), lambda h, i: te.exp(A[SRC, h]) * F[SRC, h, i] + te.sqrt(C[DST]))
    lines = message_block(op, Schedule(op), Tile(0, 8), lambda f, g, x: f"acc[{f}] += {x};")
    code = "\n".join(lines)
    assert code.count("fg_exp") == 1 and code.count("std::sqrt") == 1
    first_loop = next(n for n, line in enumerate(lines) if "for (" in line)
    assert "ax_h" in lines[first_loop] and "fg_exp" in lines[first_loop + 1] and "T inv0[4];" in code
    assert code.index("const T inv1 = std::sqrt") < code.index("for (int64_t ax_i")


def test_with_a_reduction_per_element_the_rest_is_hoisted_too():
    A, F = te.placeholder((10, 4), name="A"), te.placeholder((10, 4, 8), name="F")

    def body(h):
        k = te.reduce_axis(8)
        return te.exp(A[SRC, h]) * te.sum(F[SRC, h, k] * F[DST, h, k], axis=k)

    op = te.compute((4,), body)
    code = "\n".join(message_block(op, Schedule(op), Tile(0, 4), lambda f, g, x: f"acc[{f}] += {x};"))
    assert code.index("fg_exp") < code.index("red0 = T(0)")  # the exp loop precedes the per-head reduction
