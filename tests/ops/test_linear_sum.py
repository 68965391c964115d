"""``ops.linear_sum`` against the two Linears it replaces: values, gradients (gradcheck), the registered
operator (opcheck), autocast, and bad input."""

import pytest
import torch
from torch.autograd import gradcheck

from featgraph.ops.linear_sum import linear_sum


def linears(in_a: int, in_b: int, out: int, bias: bool = True, dtype=torch.float64):
    torch.manual_seed(in_a * 31 + in_b)
    return torch.nn.Linear(in_a, out, bias=bias, dtype=dtype), torch.nn.Linear(in_b, out, bias=False, dtype=dtype)


@pytest.mark.parametrize(("rows", "in_a", "in_b", "out"), [(7, 5, 3, 4), (0, 5, 3, 4), (1, 1, 1, 1), (13, 17, 17, 9)])
@pytest.mark.parametrize("bias", [True, False])
def test_values_and_gradients_are_the_two_linears(rows, in_a, in_b, out, bias):
    lin_a, lin_b = linears(in_a, in_b, out, bias)
    a = torch.randn(rows, in_a, dtype=torch.float64, requires_grad=True)
    b = torch.randn(rows, in_b, dtype=torch.float64, requires_grad=True)
    a_before, b_before = a.detach().clone(), b.detach().clone()
    got = linear_sum(a, lin_a, b, lin_b)
    expected = lin_a(a) + lin_b(b)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(a.detach(), a_before)  # the caller's tensors are left alone
    torch.testing.assert_close(b.detach(), b_before)
    params = [a, b, *lin_a.parameters(), *lin_b.parameters()]
    grads = torch.autograd.grad(got.square().sum(), params)
    references = torch.autograd.grad(expected.square().sum(), params)
    for grad, reference in zip(grads, references, strict=True):
        torch.testing.assert_close(grad, reference)
    if rows:
        leaves = [p.detach().clone().requires_grad_() for p in (lin_a.weight, lin_b.weight)]
        if bias:
            leaves.append(lin_a.bias.detach().clone().requires_grad_())

        def operator(a, b, weight_a, weight_b, *bias):
            return torch.ops.featgraph.linear_sum(a, weight_a, b, weight_b, bias[0] if bias else None)

        assert gradcheck(operator, (a, b, *leaves))


def test_the_operator_passes_opcheck():
    def rand(*shape):
        return torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    for bias in (rand(5), None):
        args = (rand(6, 4), rand(5, 4), rand(6, 3), rand(5, 3), bias)
        result = torch.library.opcheck(torch.ops.featgraph.linear_sum.default, args)
        assert set(result.values()) == {"SUCCESS"}, result


def test_autocast_runs_in_the_autocast_dtype_as_linear_does():
    lin_a, lin_b = linears(8, 6, 4, dtype=torch.float32)
    a, b = torch.randn(10, 8), torch.randn(10, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = linear_sum(a, lin_a, b, lin_b)
        expected = lin_a(a) + lin_b(b)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)


def test_bad_shapes_name_the_argument():
    lin_a, lin_b = linears(5, 3, 4)
    a, b = torch.randn(7, 5, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"b: expected \(rows, 3\), got \(7, 4\)"):
        linear_sum(a, lin_a, torch.randn(7, 4, dtype=torch.float64), lin_b)
    with pytest.raises(ValueError, match="same rows"):
        linear_sum(a, lin_a, b[:6], lin_b)
    with pytest.raises(ValueError, match=r"a: expected \(rows, 5\)"):
        linear_sum(a.unsqueeze(0), lin_a, b, lin_b)
