"""``ops.linear`` equals ``F.linear`` on every input, taking the compressed path on mostly-zero ones."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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


def linear_results(fn, x, weight, bias, grad) -> list[torch.Tensor]:
    """``fn``'s output and the gradients of x, weight and bias for the upstream gradient ``grad``."""
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    out = fn(*leaves)
    out.backward(grad)
    return [out.detach(), *(t.grad for t in leaves)]


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_upstream_gradient_spreads_as_in_f_linear(compressions, value):
    """inf x 0 is NaN: the dense weight gradient carries a non-finite upstream gradient along its whole row, so
    the compressed path, which skips x's zeros, leaves that gradient to the dense product."""
    x = features(300, 400, 0.01, torch.float64)
    weight, bias = torch.randn(16, 400, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    grad = torch.randn(300, 16, dtype=torch.float64)
    grad[7, 3] = value
    got, want = (linear_results(fn, x, weight, bias, grad) for fn in (ops.linear, F.linear))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, equal_nan=True)
    assert not got[2][3].isfinite().any()  # the row of the output the gradient came through
    assert compressions[0]  # the forward ran over x's nonzeros


NON_FINITE = (float("inf"), float("-inf"), float("nan"))


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_property_equals_f_linear_around_the_density_limit(data):
    """At densities either side of ``density_limit`` (so both paths run), with inf and NaN placed in x, weight,
    bias or the upstream gradient: the output and every gradient equal ``F.linear``'s, non-finite in exactly the
    same entries; gradcheck holds where everything is finite (float64)."""
    outputs = data.draw(st.sampled_from([16, 24, 32]), label="outputs")
    n, k = data.draw(st.integers(4, 14), label="n"), data.draw(st.integers(24, 48), label="k")
    limit = linear_module.density_limit(outputs)
    density = data.draw(st.floats(0.5 * limit, 1.5 * limit), label="density")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    gen = torch.Generator().manual_seed(seed)
    x = features(n, k, density, torch.float64, seed) * torch.randn(n, k, generator=gen, dtype=torch.float64).sign()
    weight = torch.randn(outputs, k, generator=gen, dtype=torch.float64)
    bias = torch.randn(outputs, generator=gen, dtype=torch.float64)
    grad = torch.randn(n, outputs, generator=gen, dtype=torch.float64)
    tensors = {"x": x, "weight": weight, "bias": bias, "grad": grad}
    placed = st.tuples(st.sampled_from(list(tensors)), st.integers(0, 10**6), st.sampled_from(NON_FINITE))
    for name, index, value in data.draw(st.lists(placed, max_size=3), label="non-finite"):
        flat = tensors[name].view(-1)
        flat[index % flat.numel()] = value
    originals = {name: t.clone() for name, t in tensors.items()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(linear_module, "MIN_ELEMENTS", 0)  # small enough for gradcheck, with the real density limit
        got = linear_results(ops.linear, x, weight, bias, grad)
        want = linear_results(F.linear, x, weight, bias, grad)
        for name, g, w in zip(("output", "x.grad", "weight.grad", "bias.grad"), got, want, strict=True):
            assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g.isposinf(), w.isposinf()), name
            assert torch.equal(g.isneginf(), w.isneginf()), name
            torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12, equal_nan=True, msg=name)
        for name, t in tensors.items():
            torch.testing.assert_close(t, originals[name], rtol=0, atol=0, equal_nan=True, msg=name)
        if all(bool(t.isfinite().all()) for t in tensors.values()):
            leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
            assert gradcheck(ops.linear, leaves, nondet_tol=1e-12, fast_mode=True)
