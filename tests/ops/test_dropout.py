import pytest
import torch
from torch.autograd import gradcheck

from featgraph.ops import dropout
from featgraph.ops.dropout import dropout_with_seed


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
    torch.manual_seed(3)
    assert gradcheck(lambda t: (torch.manual_seed(5), dropout(t, 0.3))[1], (x.detach().requires_grad_(),))


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
