import pytest

from featgraph import te
from featgraph.schedule import Schedule, build_schedule, default_schedule


def mlp_op(d1=8, d2=16):
    XV, W = te.placeholder((5, d1), name="XV"), te.placeholder((d1, d2), name="W")
    k = te.reduce_axis((0, d1), name="k")
    return te.compute((d2,), lambda i: te.sum(XV[0, k] * W[k, i], axis=k))


def test_primitives_are_recorded_as_plain_data():
    op = mlp_op()
    s = Schedule(op)
    i, k = op.axis[0], op.reduce_axis[0]
    s.split(i, 4).vectorize(i).unroll(k).parallel(i).bind(i, "thread.x").tree_reduce(k, "thread.x").reorder(k, i)
    assert s.plan(i).factor == 4 and s.plan(i).vectorize and s.plan(i).parallel and s.plan(i).bind == "thread.x"
    assert s.plan(k).unroll and s.plan(k).tree_reduce == "thread.x"
    assert [a.name for a in s.order] == [k.name, i.name]


def test_default_puts_wide_reduce_outside_and_vectorises():
    op = mlp_op(d2=16)
    s = default_schedule(op)
    assert s.plan(op.axis[0]).vectorize and [a.kind for a in s.order] == ["reduce", "axis"]
    narrow = mlp_op(d2=2)
    assert default_schedule(narrow).order is None


def test_errors():
    op, other = mlp_op(), mlp_op()
    s = Schedule(op)
    with pytest.raises(ValueError, match="does not belong"):
        s.split(other.axis[0], 2)
    with pytest.raises(ValueError, match="factor must be >= 1"):
        s.split(op.axis[0], 0)
    with pytest.raises(ValueError, match="bind tag"):
        s.bind(op.axis[0], "warp")
    with pytest.raises(ValueError, match="reduce axis"):
        s.tree_reduce(op.axis[0])
    with pytest.raises(ValueError, match="different compute"):
        build_schedule(op, Schedule(other))


def test_fds_function_receives_schedule_and_output():
    op = mlp_op()
    seen = []
    s = build_schedule(op, lambda sched, out: seen.append((sched, out)) or sched.split(out.axis[0], 8))
    assert seen[0][1] is op and s.plan(op.axis[0]).factor == 8
