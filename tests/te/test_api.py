import functools
import inspect

import pytest

from featgraph import te
from featgraph.te.expr import BinOp, Call, Load, Reduce, Var


def test_compute_builds_a_tree_once():
    XV = te.placeholder((10, 4), name="XV")
    calls = []

    def body(i):
        calls.append(i)
        return XV[Var("src", "src"), i] * 2

    op = te.compute((4,), body)
    assert len(calls) == 1 and op.shape == (4,) and op.axis[0].extent == 4
    assert isinstance(op.body, BinOp) and isinstance(op.body.a, Load)
    assert [p.name for p in op.placeholders] == ["XV"]


class _Body:
    def __call__(self, row, col):
        return row * col

    def method(self, row, col):
        return row - col


def _wrapped(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)

    return wrapper


@pytest.mark.parametrize(
    "fn",
    [
        lambda i, j: i + j,
        lambda *axes: axes[0] + axes[1],
        functools.partial(lambda scale, i, j: i * scale + j, 3),
        _Body(),
        _Body().method,
        _wrapped(lambda first, second: first + second),
    ],
)
def test_compute_names_its_axes_by_the_functions_parameters(fn):
    """Axis names come from the parameters, as ``inspect.signature`` lists them, or are numbered for ``*axes``."""
    op = te.compute((3, 4), fn)
    signature = inspect.signature(fn).parameters.values()
    expected = ["i0", "i1"] if any(p.kind == p.VAR_POSITIONAL for p in signature) else [p.name for p in signature]
    assert [a.label for a in op.axis] == expected
    assert [a.extent for a in op.axis] == [3, 4]


@pytest.mark.parametrize("fn", [lambda: 1, lambda i: i])
def test_compute_names_a_function_of_the_wrong_arity(fn):
    with pytest.raises(ValueError, match="compute of 2 dims needs a function of 2 axes"):
        te.compute((3, 4), fn)


def test_max_min_reduce_or_elementwise():
    k = te.reduce_axis((2, 7), name="k")
    assert (k.start, k.extent) == (2, 5)
    assert isinstance(te.max(k * 1, axis=k), Reduce)
    assert isinstance(te.max(k, 0), Call) and te.min(k, 1).fn == "min"
    with pytest.raises(TypeError, match="needs axis="):
        te.max(k * 1)
    with pytest.raises(TypeError, match="either two expressions"):
        te.max(k, 0, axis=k)
    with pytest.raises(TypeError, match="reduce axes made by te.reduce_axis"):
        te.sum(k, axis=Var("i", "axis", 3))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: te.placeholder((3,), dtype="int32", name="X"), TypeError, "dtype must be one of"),
        (lambda: te.placeholder((), name="X"), ValueError, "non-empty"),
        (lambda: te.placeholder((3,), name="not valid"), ValueError, "identifier"),
        (lambda: te.placeholder((3, 2), name="X")[0], IndexError, "has 2 dims"),
        (lambda: te.compute((3,), lambda i, j: i), ValueError, "function of 1 axes"),
        (lambda: te.compute((0,), lambda i: i), ValueError, "positive"),
        (lambda: te.reduce_axis((3, 3)), ValueError, "non-empty"),
        (lambda: te.cast(1, "int8"), TypeError, "cannot cast"),
        (lambda: bool(te.reduce_axis(3) > 1), TypeError, "te.where"),
        (lambda: te.exp("x"), TypeError, "cannot use str"),
    ],
)
def test_errors_name_the_problem(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_two_placeholders_with_one_name_are_rejected():
    a, b = te.placeholder((3,), name="X"), te.placeholder((3,), name="X")
    with pytest.raises(ValueError, match="named 'X'"):
        te.compute((3,), lambda i: a[i] + b[i])
