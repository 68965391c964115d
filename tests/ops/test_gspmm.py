import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from tests.conftest import assert_gpu_target_agrees, random_edges
from tests.templates.reference import reduce_messages

N, E = 9, 30
SHAPES = {
    "same": ((3,), (3,)),
    "per-head-weight": ((2, 3), (2, 1)),
    "vector-lhs-scalar-rhs": ((4,), (1,)),
    "one-dim": ((), ()),
}
TORCH_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "copy_lhs": lambda a, b: a,
    "copy_rhs": lambda a, b: b,
}


@pytest.fixture(scope="module")
def graph():
    src, dst = random_edges(N, E, seed=21)  # isolated vertices, a duplicate edge, a self loop
    return fg.Graph(src, dst, N)


def data(shape_case: str, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    fl, fr = SHAPES[shape_case]
    lhs = torch.randn((N, *fl), generator=gen, dtype=torch.float64)
    rhs = torch.rand((E, *fr), generator=gen, dtype=torch.float64) + 0.5  # away from 0 for div
    return lhs.requires_grad_(), rhs.requires_grad_()


def reference(g, op, reduce, lhs, rhs):
    src, dst = g.coo()
    a = lhs if lhs.dim() > 1 else lhs.unsqueeze(1)
    b = rhs if rhs.dim() > 1 else rhs.unsqueeze(1)
    full = torch.broadcast_shapes(a.shape[1:], b.shape[1:])
    messages = TORCH_OPS[op](a[src].expand(E, *full) if op != "copy_rhs" else a[src], b.expand(E, *full))
    if op == "copy_lhs":
        messages = a[src].expand(E, *a.shape[1:])
    if op == "copy_rhs":
        messages = b
    out = reduce_messages(messages, dst, N, reduce)
    return out.squeeze(-1) if lhs.dim() == 1 and rhs.dim() == 1 else out  # DGL's scalar features stay 1-D


@pytest.mark.parametrize("shape_case", list(SHAPES))
@pytest.mark.parametrize("reduce", ops.REDUCERS)
@pytest.mark.parametrize("op", list(TORCH_OPS))
def test_forward_and_gradients(graph, op, reduce, shape_case):
    lhs, rhs = data(shape_case)
    out = ops.gspmm(graph, op, reduce, lhs, rhs)
    expected = reference(graph, op, reduce, lhs.detach(), rhs.detach())
    torch.testing.assert_close(out, expected)
    assert gradcheck(lambda a, b: ops.gspmm(graph, op, reduce, a, b), (lhs, rhs))


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradients_match_dense_autograd(graph, reduce):
    lhs, rhs = data("per-head-weight", seed=3)
    ours = torch.autograd.grad(ops.gspmm(graph, "mul", reduce, lhs, rhs).square().sum(), (lhs, rhs))
    ref = torch.autograd.grad(reference(graph, "mul", reduce, lhs, rhs).square().sum(), (lhs, rhs))
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b)


def test_max_gradient_reaches_only_winning_edges(graph):
    lhs, _ = data("same", seed=4)
    out = ops.copy_u_max(graph, lhs)
    (grad,) = torch.autograd.grad(out.sum(), lhs)
    src, dst = graph.coo()
    expected = torch.zeros_like(lhs)
    for v in range(N):
        into = (dst == v).nonzero().flatten()
        if into.numel():
            for i in range(lhs.shape[1]):
                winner = src[into[lhs[src[into], i].argmax()]]
                expected[winner, i] += 1
    torch.testing.assert_close(grad, expected)


def test_shape_rule_and_errors(graph):
    from featgraph.ops.binary import out_shape

    lhs, rhs = data("per-head-weight")
    assert ops.gspmm(graph, "mul", "sum", lhs, rhs).shape == out_shape(N, "mul", lhs, rhs) == (N, 2, 3)
    with pytest.raises(ValueError, match="op must be one of"):
        ops.gspmm(graph, "pow", "sum", lhs, rhs)
    with pytest.raises(ValueError, match="reduce must be one of"):
        ops.gspmm(graph, "mul", "prod", lhs, rhs)
    with pytest.raises(ValueError, match="needs rhs"):
        ops.gspmm(graph, "mul", "sum", lhs, None)
    with pytest.raises(ValueError, match="do not broadcast"):
        ops.gspmm(graph, "mul", "sum", lhs, torch.randn(E, 3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="needs 30 rows"):
        ops.gspmm(graph, "mul", "sum", lhs, torch.randn(E + 1, 2, 1, dtype=torch.float64))
    with pytest.raises(TypeError, match="share one dtype"):
        ops.gspmm(graph, "mul", "sum", lhs, rhs.float())


@pytest.mark.parametrize("reduce", ops.REDUCERS)
def test_scalar_features_give_a_1d_result_as_dgl(graph, reduce):
    """1-D operands are DGL's scalar features: (N,) out, not (N, 1), which ``x + out`` would broadcast to N x N."""
    from featgraph.ops.binary import out_shape

    lhs, rhs = data("one-dim", seed=5)
    out = ops.gspmm(graph, "mul", reduce, lhs, rhs)
    assert out.shape == out_shape(N, "mul", lhs, rhs) == (N,)
    torch.testing.assert_close(out, reference(graph, "mul", reduce, lhs.detach(), rhs.detach()))
    assert ops.SHORTCUTS[f"copy_u_{reduce}"](graph, lhs).shape == ops.SHORTCUTS[f"copy_e_{reduce}"](graph, rhs).shape
    assert ops.gspmm(graph, "mul", reduce, lhs, rhs.unsqueeze(1)).shape == (N, 1)  # a 2-D operand keeps its axis
    assert gradcheck(lambda a, b: ops.gspmm(graph, "mul", reduce, a, b), (lhs, rhs))


def test_inputs_untouched_and_empty_graph():
    g = fg.Graph(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 4)
    x = torch.randn(4, 3, requires_grad=True)
    before = x.detach().clone()
    out = ops.copy_u_sum(g, x)
    assert torch.equal(out, torch.zeros(4, 3)) and torch.equal(x.detach(), before)
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(4, 3))


@pytest.mark.parametrize(("op", "shape_case"), [("mul", "per-head-weight"), ("copy_lhs", "same"), ("div", "one-dim")])
@pytest.mark.parametrize("reduce", ops.REDUCERS)
def test_through_the_triton_kernels(gpu, graph, op, reduce, shape_case):
    lhs, rhs = data(shape_case, seed=7)
    out = assert_gpu_target_agrees(lambda g, a, b: ops.gspmm(g, op, reduce, a, b), graph, (lhs, rhs), gpu)
    torch.testing.assert_close(out, reference(graph, op, reduce, lhs.detach(), rhs.detach()))
