import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck, gradgradcheck

from featgraph.ops import dropout
from featgraph.ops.dropout import dropout_with_seed

SAME = {"rtol": 0, "atol": 0, "equal_nan": True}
FUZZ = settings(
    max_examples=20, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def mask_of(shape: tuple[int, ...], p: float, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """featgraph's keep mask (1 kept, 0 dropped) for ``seed``: its dropout of ones, unscaled."""
    return (dropout_with_seed(torch.ones(shape, dtype=dtype), p, seed) != 0).to(dtype)


def torch_dropout(x: torch.Tensor, mask: torch.Tensor, p: float) -> torch.Tensor:
    """torch's dropout given its mask: ``x * mask * (1 / (1 - p))``, as ``aten::native_dropout`` computes it."""
    return x * mask * (1.0 / (1.0 - p))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drops_a_fraction_p_and_rescales_the_rest(dtype, p):
    x = torch.rand(1000, 1001, dtype=dtype) + 0.5
    before = x.clone()
    y = dropout(x, p)
    kept = y != 0
    assert abs(kept.double().mean().item() - (1 - p)) < 0.005  # 1e6 draws: std below 0.0005
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    assert torch.equal(x, before)
    rows, cols = kept.double().mean(1), kept.double().mean(0)  # no structure along either axis
    assert rows.std() < 0.05 and cols.std() < 0.05


def test_backward_applies_the_forward_mask_without_storing_it():
    x = (torch.rand(37, 129, dtype=torch.float64) + 0.5).requires_grad_()
    y = dropout(x, 0.4)
    g = torch.randn_like(y)
    y.backward(g)
    torch.testing.assert_close(x.grad, torch.where(y != 0, g / 0.6, torch.zeros_like(g)))
    small = (torch.rand(9, 13, dtype=torch.float64) + 0.5).requires_grad_()  # gradcheck: a pass per element
    assert gradcheck(lambda t: (torch.manual_seed(5), dropout(t, 0.3))[1], (small,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_relu_dropout_is_dropout_of_relu_in_one_pass(dtype):
    """Forward and gradient equal dropout's of relu(x) with the same seed (torch's relu, featgraph's mask);
    the caller's tensor is left alone; not training, it is relu alone."""
    x = torch.randn(301, 17, dtype=torch.float64).to(dtype)
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])  # NaN stays NaN, as in torch's relu
    before = x.clone()
    fused_x, reference_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    fused = dropout_with_seed(fused_x, 0.3, 99, relu=True)
    reference = dropout_with_seed(torch.relu(reference_x), 0.3, 99)
    same = {"rtol": 0, "atol": 0, "equal_nan": True}
    torch.testing.assert_close(fused, reference, **same)
    torch.testing.assert_close(x, before, **same)
    grad = torch.randn_like(fused)
    fused.backward(grad)
    reference.backward(grad)
    assert torch.equal(fused_x.grad, reference_x.grad)
    torch.testing.assert_close(dropout(x, 0.3, training=False, relu=True), torch.relu(x), **same)
    torch.testing.assert_close(dropout(x, 0.0, relu=True), torch.relu(x), **same)
    if dtype == torch.float64:
        clean = torch.randn(31, 7, dtype=dtype, requires_grad=True)
        assert gradcheck(lambda t: (torch.manual_seed(5), dropout(t, 0.3, relu=True))[1], (clean,))


def test_seeded_by_torch_and_fresh_per_call():
    x = torch.ones(10_000)
    torch.manual_seed(7)
    first, second = dropout(x, 0.5), dropout(x, 0.5)
    torch.manual_seed(7)
    assert torch.equal(dropout(x, 0.5), first)
    assert not torch.equal(first, second)


def test_identity_and_edge_cases():
    x = torch.randn(8, 3)
    assert dropout(x, 0.5, training=False) is x and dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    strided = torch.randn(6, 10)[:, ::2]
    y = dropout(strided, 0.5)
    torch.testing.assert_close(y[y != 0], strided[y != 0] * 2)
    half = dropout(torch.ones(1000, dtype=torch.float16), 0.5)
    assert half.dtype == torch.float16 and 0.3 < (half != 0).float().mean() < 0.7
    assert dropout(torch.empty(0, 4), 0.5).shape == (0, 4)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        dropout(x, 1.5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_draws_the_float32_mask_and_rounds_once(dtype):
    """16-bit data drops what float32 data with the same seed drops, scaled in float32 and rounded once to
    its dtype; the gradient is 16-bit too."""
    x = (torch.randn(300, 7) * 3).to(dtype).requires_grad_(True)
    y = dropout_with_seed(x, 0.3, seed=11)
    reference = dropout_with_seed(x.detach().float(), 0.3, seed=11)
    assert y.dtype == dtype
    assert torch.equal(y.detach(), reference.to(dtype))
    (grad,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert grad.dtype == dtype and torch.equal(grad, dropout_with_seed(torch.ones(300, 7), 0.3, seed=11).to(dtype))


def test_te_keep_in_a_udf_draws_the_same_mask_as_dropout():
    """One hash for both: a fused kernel's te.keep and ops.dropout agree for the same seed and element."""
    import featgraph as fg
    from featgraph import te

    g = fg.Graph(torch.randint(0, 50, (3000,)), torch.randint(0, 50, (3000,)), 50)
    seed = te.placeholder((1,), "int64", "SEED")
    mask = fg.sddmm(g, lambda s, t, e: te.compute((2,), lambda h: te.keep(seed[0], e * 2 + h, 0.3)))
    torch.manual_seed(4)
    expected = dropout(torch.ones(3000, 2, dtype=torch.float32), 0.3)
    torch.manual_seed(4)
    torch.testing.assert_close(mask(SEED=torch.randint(0, 2**62, (1,))), expected)
    with pytest.raises(ValueError, match="drop probability"):
        te.keep(seed[0], 0, 1.0)


@pytest.mark.parametrize("relu", [False, True])
def test_second_order_gradients_are_torchs_with_the_same_mask(relu):
    """The backward is differentiable (gradient penalties, Hessian-vector products): gradgradcheck in float64,
    and the second derivatives equal those of torch's formula built on featgraph's own mask."""
    seeded = lambda t: dropout_with_seed(t, 0.3, 21, relu=relu)  # noqa: E731
    x = torch.randn(9, 7, dtype=torch.float64, requires_grad=True)
    assert gradcheck(seeded, (x,)) and gradgradcheck(seeded, (x,))
    mask = mask_of((9, 7), 0.3, 21)
    reference = lambda t: torch_dropout(torch.relu(t) if relu else t, mask, 0.3)  # noqa: E731
    w = torch.randn(9, 7, dtype=torch.float64)
    v = torch.randn(9, 7, dtype=torch.float64)
    scales = torch.randn(7, dtype=torch.float64)
    results = []
    for f in (seeded, reference):
        leaf, scale = x.detach().clone().requires_grad_(), scales.clone().requires_grad_()
        out = f(torch.tanh(leaf) * scale)
        (g,) = torch.autograd.grad((out * w).sum() + (out**2).sum(), leaf, create_graph=True)
        penalty = (g**2).sum()  # a gradient penalty: its gradient runs through the backward's backward
        hvp = torch.autograd.grad(g, leaf, v, retain_graph=True)[0]  # a Hessian-vector product
        results.append((g.detach(), hvp, *torch.autograd.grad(penalty, (leaf, scale))))
    for ours, theirs in zip(*results, strict=True):
        torch.testing.assert_close(ours, theirs)
    upstream = torch.randn(9, 7, dtype=torch.float64, requires_grad=True)  # d/d(grad) of the gradient: the mask
    (g,) = torch.autograd.grad(seeded(x), x, upstream, create_graph=True)
    (again,) = torch.autograd.grad(g, upstream, v)
    expected = torch_dropout(v, mask * (x > 0) if relu else mask, 0.3)
    torch.testing.assert_close(again, expected, **SAME)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_a_dropped_nan_or_infinity_is_nan_as_in_torch(dtype):
    """torch multiplies by the mask, so a dropped NaN or infinity is NaN (inf * 0); kept ones are scaled.
    The gradient is the same product on the incoming gradient."""
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -2.0, 3.0] * 200, dtype=dtype)
    before = x.clone()
    mask = mask_of(x.shape, 0.4, 8, dtype)
    out = dropout_with_seed(x, 0.4, 8)
    torch.testing.assert_close(out, torch_dropout(x, mask, 0.4), **SAME)
    assert out[mask == 0].isnan().sum() == 3 * 200 - mask.view(200, 5)[:, :3].sum()  # dropped non-finite: NaN
    torch.testing.assert_close(x, before, **SAME)
    grad = x.flip(0)
    leaf = torch.ones_like(x, requires_grad=True)
    dropout_with_seed(leaf, 0.4, 8).backward(grad)
    torch.testing.assert_close(leaf.grad, torch_dropout(grad, mask, 0.4), **SAME)


@pytest.mark.parametrize("p", [np.float32(0.25), np.float64(0.25), torch.tensor(0.25), torch.tensor(0.25).double()])
def test_p_as_numpy_numbers_and_0d_tensors_as_torch_takes_them(p):
    """The same mask as the Python float: np.float32/np.float64/np.int64 and 0-d tensors, as torch accepts."""
    x = torch.rand(200, 9) + 0.5
    torch.manual_seed(6)
    expected = dropout(x, float(p))
    torch.manual_seed(6)
    torch.testing.assert_close(dropout(x, p), expected, **SAME)
    torch.testing.assert_close(dropout_with_seed(x, p, 3), dropout_with_seed(x, float(p), 3), **SAME)
    assert dropout(x, np.int64(0)) is x and torch.equal(dropout(x, np.int64(1)), torch.zeros_like(x))
    assert torch.equal(dropout(x, torch.tensor(1)), torch.zeros_like(x))


@pytest.mark.parametrize(
    ("p", "error", "match"),
    [
        (1.5, ValueError, r"^p: .*\[0, 1\]"),
        (-0.1, ValueError, r"^p: .*\[0, 1\]"),
        (float("nan"), ValueError, r"^p: .*\[0, 1\]"),
        (np.float32(2.0), ValueError, r"^p: .*\[0, 1\]"),
        (np.int64(-1), ValueError, r"^p: .*\[0, 1\]"),
        (torch.tensor(1.5), ValueError, r"^p: .*\[0, 1\]"),
        (True, TypeError, r"^p: .*bool"),
        (np.bool_(False), TypeError, r"^p: .*bool"),
        (torch.tensor(True), TypeError, r"^p: .*torch.bool"),
        (torch.tensor([0.5]), TypeError, r"^p: .*shape \(1,\)"),
        (torch.tensor([[0.5]]), TypeError, r"^p: .*shape \(1, 1\)"),
        (torch.tensor(0.5j), TypeError, r"^p: .*complex"),
        (0.5j, TypeError, r"^p: .*complex"),
        ("0.5", TypeError, r"^p: .*str"),
        (None, TypeError, r"^p: .*NoneType"),
        ([0.5], TypeError, r"^p: .*list"),
    ],
)
def test_bad_p_is_refused_by_name(p, error, match):
    x = torch.randn(4, 3)
    with pytest.raises(error, match=match):
        dropout(x, p)
    with pytest.raises(error, match=match):
        dropout_with_seed(x, p, 1)


@FUZZ
@given(
    p=st.floats(0.05, 0.95),
    rows=st.integers(1, 300),
    cols=st.integers(1, 40),
    seed=st.integers(0, 2**62 - 1),
    relu=st.booleans(),
)
def test_dropout_against_torchs_formula(p, rows, cols, seed, relu):
    """Statistics and gradients of the first and second order against torch's formula on featgraph's mask:
    the kept fraction near 1 - p, kept values times 1 / (1 - p), gradients through the same mask."""
    gen = torch.Generator().manual_seed(seed % 2**31)
    x = torch.randn(rows, cols, generator=gen, dtype=torch.float64) + 0.1
    before = x.clone()
    mask = mask_of(x.shape, p, seed)
    n = x.numel()
    assert abs(mask.mean().item() - (1 - p)) <= 5 * (p * (1 - p) / n) ** 0.5 + 2 / n  # binomial: 5 sigma
    leaf = x.clone().requires_grad_()
    out = dropout_with_seed(leaf, p, seed, relu=relu)
    source = torch.relu(x) if relu else x
    torch.testing.assert_close(out.detach(), source * mask / (1 - p), rtol=1e-15, atol=0)
    torch.testing.assert_close(x, before, **SAME)
    upstream = torch.randn(x.shape, generator=gen, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(out, leaf, upstream, create_graph=True)
    gate = mask * (x > 0) if relu else mask
    torch.testing.assert_close(grad.detach(), upstream.detach() * gate / (1 - p), rtol=1e-15, atol=0)
    v = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    (second,) = torch.autograd.grad(grad, upstream, v)
    torch.testing.assert_close(second, v * gate / (1 - p), rtol=1e-15, atol=0)
