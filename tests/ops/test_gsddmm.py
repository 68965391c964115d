import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from tests.conftest import assert_gpu_target_agrees, random_edges

N, E = 8, 25
PAIRS = [("u", "v"), ("u", "e"), ("e", "v"), ("v", "u"), ("v", "e")]
TORCH_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "dot": lambda a, b: (a * b).sum(-1, keepdim=True),
}


@pytest.fixture(scope="module")
def graph():
    src, dst = random_edges(N, E, seed=31)
    return fg.Graph(src, dst, N)


def pick(g, target, x):
    src, dst = g.coo()
    return x[src] if target == "u" else x[dst] if target == "v" else x


def make(target, features, seed):
    rows = E if target == "e" else N
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand((rows, *features), generator=gen, dtype=torch.float64) + 0.5).requires_grad_()


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (2, 1))], ids=["same", "broadcast"])
@pytest.mark.parametrize(("lhs_target", "rhs_target"), PAIRS)
@pytest.mark.parametrize("op", list(TORCH_OPS))
def test_forward_and_gradients(graph, op, lhs_target, rhs_target, shapes):
    lhs, rhs = make(lhs_target, shapes[0], 1), make(rhs_target, shapes[1], 2)
    out = ops.gsddmm(graph, op, lhs, rhs, lhs_target, rhs_target)
    a, b = pick(graph, lhs_target, lhs.detach()), pick(graph, rhs_target, rhs.detach())
    torch.testing.assert_close(out, TORCH_OPS[op](a, b))
    assert gradcheck(lambda x, y: ops.gsddmm(graph, op, x, y, lhs_target, rhs_target), (lhs, rhs))


def test_named_shortcuts_match_the_generic_op(graph):
    x, w = make("u", (4,), 3), make("e", (4,), 4)
    torch.testing.assert_close(ops.u_dot_v(graph, x, x), ops.gsddmm(graph, "dot", x, x, "u", "v"))
    torch.testing.assert_close(ops.e_div_v(graph, w, x), ops.gsddmm(graph, "div", w, x, "e", "v"))
    torch.testing.assert_close(ops.u_mul_e_sum(graph, x, w), ops.gspmm(graph, "mul", "sum", x, w))
    torch.testing.assert_close(ops.copy_e_max(graph, w), ops.gspmm(graph, "copy_rhs", "max", None, w))
    src, _ = graph.coo()
    torch.testing.assert_close(ops.copy_u(graph, x), x.detach()[src])
    # 6 gspmm prefixes x 4 reducers, 6 ordered target pairs x 5 gsddmm ops, copy_u and copy_v
    assert len(ops.SHORTCUTS) == 6 * 4 + 6 * 5 + 2
    assert {"copy_u_sum", "u_mul_e_max", "u_add_v", "v_sub_u", "e_dot_u", "copy_v"} <= set(ops.SHORTCUTS)


def test_against_pyg_gather_when_installed(graph):
    pytest.importorskip("torch_geometric")
    x = make("u", (5,), 5).detach()
    src, dst = graph.coo()
    torch.testing.assert_close(ops.u_add_v(graph, x, x), x[src] + x[dst])


def test_shape_rule_and_errors(graph):
    from featgraph.ops.binary import out_shape

    x = make("u", (2, 3), 6)
    assert ops.u_dot_v(graph, x, x).shape == out_shape(E, "dot", x, x) == (E, 2, 1)
    with pytest.raises(ValueError, match="targets must be in"):
        ops.gsddmm(graph, "add", x, x, "w", "v")
    with pytest.raises(ValueError, match="op must be one of"):
        ops.gsddmm(graph, "max", x, x)


@pytest.mark.parametrize("op", list(TORCH_OPS))
def test_scalar_features_give_a_1d_result_as_dgl(graph, op):
    """1-D operands are DGL's scalar features: (E,) out, not (E, 1); one 2-D operand keeps the feature axis."""
    from featgraph.ops.binary import out_shape

    x, w = make("u", (), 7), make("e", (), 8)
    out = ops.gsddmm(graph, op, x, w, "u", "e")
    assert out.shape == out_shape(E, op, x, w) == (E,)
    src, _ = graph.coo()
    torch.testing.assert_close(out, TORCH_OPS[op](x.detach()[src].unsqueeze(1), w.detach().unsqueeze(1)).squeeze(1))
    assert ops.copy_u(graph, x).shape == (E,)
    assert ops.gsddmm(graph, op, x, w.unsqueeze(1), "u", "e").shape == (E, 1)
    assert gradcheck(lambda a, b: ops.gsddmm(graph, op, a, b, "u", "e"), (x, w))


@pytest.mark.parametrize(("lhs_target", "rhs_target"), [("u", "v"), ("e", "v"), ("v", "u")])
@pytest.mark.parametrize("op", ["add", "div", "dot"])
def test_through_the_triton_kernels(gpu, graph, op, lhs_target, rhs_target):
    lhs, rhs = make(lhs_target, (2, 3), 1), make(rhs_target, (2, 3) if op == "dot" else (2, 1), 2)
    out = assert_gpu_target_agrees(
        lambda g, x, y: ops.gsddmm(g, op, x, y, lhs_target, rhs_target), graph, (lhs, rhs), gpu
    )
    a, b = pick(graph, lhs_target, lhs.detach()), pick(graph, rhs_target, rhs.detach())
    torch.testing.assert_close(out, TORCH_OPS[op](a, b))
