"""``Kernel`` calls under ``torch.compile``: the ``featgraph::kernel`` operator (opcheck, gradients through
``featgraph::kernel_backward``) and a compiled function agreeing with the eager kernel, for every template."""

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import te
from featgraph.templates import edge_sum
from featgraph.templates.kernel import registered
from tests.conftest import random_edges

N, E, D = 12, 50, 4


@pytest.fixture(scope="module")
def graph():
    return fg.Graph(*random_edges(N, E, seed=3), N)


X = te.placeholder((N, D), "float64", "X")
W = te.placeholder((E, 1), "float64", "W")


def weighted_message(s, t, e):
    return te.compute((D,), lambda i: X[s, i] * W[e, 0])


KERNELS = {
    "spmm-sum": lambda g: fg.spmm(g, weighted_message, "sum"),
    "spmm-max": lambda g: fg.spmm(g, weighted_message, "max"),
    "spmm-logsumexp": lambda g: fg.spmm(g, weighted_message, "logsumexp"),
    "sddmm": lambda g: fg.sddmm(g, lambda s, t, e: te.compute((2,), lambda i: X[s, i] * X[t, 3] * W[e, 0])),
    "edge_sum": lambda g: edge_sum(g, lambda s, t, e: te.compute((D,), lambda i: X[s, i] * W[e, 0])),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_operator_and_compiled_calls(graph, name):
    kernel = KERNELS[name](graph)
    assert registered(kernel.key) is kernel
    x = torch.randn(N, D, dtype=torch.float64, requires_grad=True)
    w = torch.randn(E, 1, dtype=torch.float64, requires_grad=True)
    inputs = [{"X": x, "W": w}[n] for n in kernel.placeholder_names]
    result = torch.library.opcheck(torch.ops.featgraph.kernel.default, (kernel.key, inputs))
    assert set(result.values()) == {"SUCCESS"}, result
    assert gradcheck(lambda *xs: torch.ops.featgraph.kernel(kernel.key, list(xs))[0], tuple(inputs))
    compiled = torch.compile(lambda a, b: kernel(X=a, W=b), backend="aot_eager", fullgraph=True)
    out, expected = compiled(x, w), kernel(X=x, W=w)
    assert out.shape == kernel.output_shape()
    torch.testing.assert_close(out, expected)
    weights = torch.randn_like(out)
    grads = torch.autograd.grad((out * weights).sum(), (x, w))
    for got, want in zip(grads, torch.autograd.grad((expected * weights).sum(), (x, w)), strict=True):
        torch.testing.assert_close(got, want)


def test_compiled_call_names_missing_placeholders(graph):
    kernel = KERNELS["spmm-sum"](graph)
    compiled = torch.compile(lambda a: kernel(X=a), backend="aot_eager")  # the error falls back to eager's
    with pytest.raises(TypeError, match=r"missing \['W'\]"):
        compiled(torch.randn(N, D, dtype=torch.float64))


def test_a_dead_kernel_is_named_in_the_error():
    with pytest.raises(KeyError, match="no live featgraph kernel"):
        registered("spmm-0000-0")
