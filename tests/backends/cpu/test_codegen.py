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
