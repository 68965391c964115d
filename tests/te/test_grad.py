from featgraph import te
from featgraph.te.expr import BinOp, Call, Const, Reduce, Var
from featgraph.te.grad import ONE, ZERO, diff, is_zero, substitute

SRC = Var("src", "src")


def test_constant_rules_and_simplification():
    X = te.placeholder((4, 3), name="X")
    i = Var("ax_i", "axis", 3)
    site, other = X[SRC, i], X[SRC, 0]
    assert diff(site, site) is ONE
    assert is_zero(diff(other * 2, site))
    assert diff(site * 3, site).__class__ is Const  # d(3x)/dx folds to the constant 3
    assert is_zero(diff(BinOp("<", site, other), site))


def test_sum_over_the_sites_axis_frees_it_and_keeps_others():
    X = te.placeholder((4, 3), name="X")
    k, j = te.reduce_axis(3, "k"), te.reduce_axis(2, "j")
    site = X[SRC, k]
    freed = diff(te.sum(site * 2, axis=k), site)
    assert not isinstance(freed, Reduce)  # k now names the element being differentiated
    kept = diff(te.sum(site * j, axis=(k, j)), site)
    assert isinstance(kept, Reduce) and kept.axes == (j,)


def test_relu_derivative_keeps_the_bound_reduce_intact():
    X = te.placeholder((4, 3), name="X")
    k = te.reduce_axis(3, "k")
    site = X[SRC, k]
    total = te.sum(site, axis=k)
    d = diff(te.max(total, 0), site)
    assert isinstance(d, Call) and d.fn == "where"
    renamed = substitute(d, lambda v: Var("J", "axis", 3) if v is k else None)
    condition = renamed.args[0]
    assert any(isinstance(n, Reduce) and n.axes == (k,) for n in condition.walk())  # bound k untouched
    assert ZERO.value == 0
