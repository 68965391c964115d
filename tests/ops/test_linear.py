"""``ops.linear`` equals ``F.linear`` on every input, taking the compressed path on mostly-zero ones."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

from featgraph import ops

linear_module = sys.modules["featgraph.ops.linear"]


def features(n: int, k: int, density: float, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, k, generator=gen, dtype=torch.float64)
    return torch.where(torch.rand(n, k, generator=gen, dtype=torch.float64) < density, x, 0.0).to(dtype)


@pytest.fixture
def compressions(monkeypatch) -> list[bool]:
    """Whether each call took the compressed path."""
    seen: list[bool] = []
    original = linear_module.compressed_rows

    def spy(x, weight, keep=False):
        rows = original(x, weight, keep)
        seen.append(rows is not None)
        return rows

    monkeypatch.setattr(linear_module, "compressed_rows", spy)
    return seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("density", "compressed"), [(0.0, True), (0.013, True), (0.04, True), (0.5, False)])
def test_forward_and_gradients_equal_f_linear(compressions, dtype, bias, density, compressed):
    """Cora-shaped bag-of-words features (odd widths): output and the gradients of x, weight and bias; the
    caller's tensors are left alone; inputs denser than ``density_limit`` take the dense product."""
    x = features(301, 1433, density, dtype)
    gen = torch.Generator().manual_seed(1)
    weight = torch.randn(37, 1433, generator=gen, dtype=dtype)
    b = torch.randn(37, generator=gen, dtype=dtype) if bias else None
    grad = torch.randn(301, 37, generator=gen, dtype=dtype)
    results = []
    for fn in (ops.linear, F.linear):
        leaves = [t.clone().requires_grad_() for t in (x, weight, *([b] if bias else []))]
        out = fn(leaves[0], leaves[1], leaves[2] if bias else None)
        out.backward(grad)
        results.append([out.detach(), *(t.grad for t in leaves)])
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, **tolerance)
    assert compressions and all(c == compressed for c in compressions)


def test_gradcheck_on_the_compressed_path(compressions, monkeypatch):
    monkeypatch.setattr(linear_module, "MIN_ELEMENTS", 0)  # a matrix small enough for numerical gradients
    monkeypatch.setattr(linear_module, "density_limit", lambda outputs: 0.5)
    x = features(23, 41, 0.06, torch.float64, seed=3).requires_grad_()
    weight = torch.randn(5, 41, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda a, w, c: ops.linear(a, w, c), (x, weight, bias), nondet_tol=1e-12)
    assert compressions and all(compressions)


def test_density_limit_grows_with_the_outputs():
    """Narrow outputs leave the compressed path nothing to win; it never exceeds 6%."""
    limits = [linear_module.density_limit(m) for m in (1, 8, 16, 64, 4096)]
    assert limits[:2] == [0.0, 0.0] and 0.0 < limits[2] < limits[3] < limits[4] <= 0.06


def test_weights_with_infinities_take_the_dense_product(compressions):
    """Zeros times inf give NaN in the dense product: a non-finite weight keeps that answer."""
    x = features(300, 400, 0.01)
    weight = torch.randn(16, 400)
    weight[3, 7] = float("inf")
    torch.testing.assert_close(ops.linear(x, weight), F.linear(x, weight), equal_nan=True)
    assert compressions == [False]


def test_nan_features_propagate_as_in_the_dense_product(compressions):
    x = features(300, 400, 0.01)
    x[5, 9] = float("nan")
    weight = torch.randn(16, 400)
    torch.testing.assert_close(ops.linear(x, weight), F.linear(x, weight), equal_nan=True)
    assert compressions == [True]


def test_other_inputs_run_f_linear():
    """Small, 16-bit and batched inputs give F.linear's results; a width that does not fit names x."""
    weight = torch.randn(16, 400)
    small = features(10, 400, 0.01)
    torch.testing.assert_close(ops.linear(small, weight), F.linear(small, weight))
    half = features(300, 400, 0.01, torch.bfloat16)
    torch.testing.assert_close(ops.linear(half, weight.bfloat16()), F.linear(half, weight.bfloat16()))
    batched = features(600, 400, 0.01).view(2, 300, 400)
    torch.testing.assert_close(ops.linear(batched, weight), F.linear(batched, weight))
    with pytest.raises(ValueError, match="^x: expected 400 features"):
        ops.linear(features(300, 401, 0.01), weight)


def test_autocast_runs_in_the_autocast_dtype():
    x, weight = features(300, 400, 0.01), torch.randn(16, 400)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, want = ops.linear(x, weight), F.linear(x, weight)
    assert out.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(out, want)


def test_an_input_modified_between_forward_and_a_later_call_is_compressed_again(compressions):
    """The rows a forward keeps serve its own gradient only: an in-place change gives a fresh compression."""
    x = features(300, 400, 0.01)
    weight = torch.randn(16, 400, requires_grad=True)
    first = ops.linear(x, weight)
    x[0, :5] = 1.0
    second = ops.linear(x, weight)
    torch.testing.assert_close(second, F.linear(x, weight.detach()))
    assert not torch.equal(first, second)
