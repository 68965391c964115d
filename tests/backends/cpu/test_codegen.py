import re

import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.backends.cpu.codegen import Emitter, Tile, message_block, reduces_inner_first, tile_flat
from featgraph.schedule import Schedule
from featgraph.te.expr import Var, free_vars

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


@pytest.mark.parametrize("reducer", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [16, 37])
def test_long_reductions_combine_simd_lanes_by_a_tree(reducer, dtype, width):
    """A vectorised reduce axis of 16+ elements keeps one partial per lane and halves them (whole lanes,
    then the remainder): the result matches torch for every reducer, dtype and a width with a remainder."""
    gen = torch.Generator().manual_seed(width)
    n, src, dst = 40, *torch.randint(0, 40, (2, 300), generator=gen)
    g = fg.Graph(src, dst, n)
    X = te.placeholder((n, width), "float32" if dtype == torch.float32 else "float64", name="X")

    def edgefunc(s, t, e):
        k = te.reduce_axis((0, width), name="k")
        return te.compute((1,), lambda i: getattr(te, reducer)(X[s, k] * X[t, k], axis=k))

    kernel = fg.sddmm(g, edgefunc, target="cpu")
    assert "_l[q + 1]" in kernel.source  # the last halving of the lane tree
    x = torch.randn(n, width, dtype=dtype, generator=gen)
    products = x[src] * x[dst]
    expected = {"sum": products.sum(1), "max": products.amax(1), "min": products.amin(1)}[reducer]
    torch.testing.assert_close(kernel(X=x).squeeze(1), expected)


def test_short_or_split_reductions_keep_the_schedules_loops():
    X = te.placeholder((10, 8), name="X")
    k = te.reduce_axis(8)
    op = te.compute((1,), lambda i: te.sum(X[SRC, k] * X[DST, k], axis=k))
    s = Schedule(op).vectorize(k)
    code = "\n".join(message_block(op, s, Tile(0, 1), lambda f, g, x: f"out[{f}] = {x};"))
    assert "reduction(+:red0)" in code and "_l[" not in code


def _edge_code(op) -> str:
    """The message block of a one-element edge UDF ``op``, as the SDDMM template stores it."""
    return "\n".join(message_block(op, Schedule(op), Tile(0, 1), lambda f, g, x: f"out[{f}] = {x};"))


def _dot(a: te.Placeholder, b: te.Placeholder):
    k = te.reduce_axis(a.shape[-1], name="k")
    return te.compute((1,), lambda i: te.sum(a[SRC, k] * b[DST, k], axis=k))


def test_a_dot_of_two_bfloat16_rows_runs_on_the_pairwise_dot():
    """The sum of products of two bfloat16 rows along their last axis becomes one ``fg_dot_bf16`` call on
    the rows' addresses; a float32 operand, or a row read along another axis, keeps the plain reduction."""
    bf16 = te.placeholder((10, 40), "bfloat16", "A"), te.placeholder((10, 40), "bfloat16", "B")
    code = _edge_code(_dot(*bf16))
    assert re.search(r"= fg_dot_bf16\(&P_A\[\(s\) \* 40 \+ (\w+)\], &P_B\[\(v\) \* 40 \+ \1\], 40\);", code)
    assert "fg_dot_bf16" not in _edge_code(_dot(bf16[0], te.placeholder((10, 40), "float32", "C")))
    columns = te.placeholder((40, 10), "bfloat16", "D")
    k = te.reduce_axis(40)
    across = te.compute((1,), lambda i: te.sum(columns[k, SRC] * columns[k, DST], axis=k))
    assert "fg_dot_bf16" not in _edge_code(across)
