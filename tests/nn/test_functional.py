import numpy as np
import pytest
import torch
import torch.nn.functional as F

from featgraph.nn import functional

pytest.importorskip("torch_geometric")


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_has_torchs_expectation_and_variance(p):
    """Keep rate, scale and per-element mean and variance against torch's dropout on the same input."""
    torch.manual_seed(0)
    x = torch.full((400, 257), 3.0)
    ours, theirs = functional.dropout(x, p), F.dropout(x, p)
    values = ours.unique()
    assert values[0] == 0 and torch.allclose(values[1:], torch.tensor(3.0 / (1 - p))) and len(values) == 2
    kept = (ours != 0).double().mean().item()
    assert kept == pytest.approx(1 - p, abs=4 * (p * (1 - p) / x.numel()) ** 0.5)
    torch.testing.assert_close(ours.mean(), theirs.mean(), atol=0.05 * 3 / (1 - p), rtol=0)
    torch.testing.assert_close(ours.var(), theirs.var(), rtol=0.05, atol=0)
    assert not torch.equal(ours != 0, theirs != 0)  # a different random stream


def test_dropout_seeded_by_torch_and_masks_the_gradient_alike():
    x = torch.randn(64, 33, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(3)
    out = functional.dropout(x, 0.4)
    torch.manual_seed(3)
    assert torch.equal(functional.dropout(x, 0.4), out)
    (grad,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(grad, (out != 0).double() / 0.6)
    seeded = lambda t: (torch.manual_seed(5), functional.dropout(t, 0.3))[1]  # noqa: E731
    assert torch.autograd.gradcheck(seeded, (x,))


def test_dropout_eval_inplace_and_bad_input():
    x = torch.randn(10, 7)
    assert functional.dropout(x, 0.5, training=False) is x
    before = x.clone()
    out = functional.dropout(x, 0.5)
    assert torch.equal(x, before)  # the caller's tensor is untouched unless inplace
    y = x.clone()
    torch.manual_seed(1)
    assert functional.dropout(y, 0.5, inplace=True) is y
    torch.manual_seed(1)
    assert torch.equal(y, functional.dropout(x, 0.5)) and not torch.equal(y, before)
    h = torch.randn(5, 3, requires_grad=True) * 1.0
    functional.dropout(h, 0.5, inplace=True).sum().backward()  # in place on a non-leaf keeps autograd
    with pytest.raises(ValueError, match="^p: "):
        functional.dropout(x, 1.5)
    with pytest.raises(TypeError, match="^input: "):
        functional.dropout([1.0], 0.5)
    assert out.shape == x.shape


class Scripted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.dropout(self.lin(x), p=0.5, training=self.training)


def test_dropout_scripts_as_torchs_and_survives_being_bound_in_its_place(monkeypatch):
    """torch.jit.script compiles torch's dropout in its place (featgraph's operator does not script); bound as
    torch.nn.functional.dropout, it still reaches torch's own off the CPU instead of itself."""
    scripted = torch.jit.script(Scripted())
    x = torch.randn(400, 6)
    assert torch.equal(scripted.eval()(x), scripted.lin(x))
    kept = (scripted.train()(x) != 0).double().mean().item()
    assert abs(kept - 0.5) < 0.05
    monkeypatch.setattr(torch.nn.functional, "dropout", functional.dropout)
    out = functional.dropout(torch.empty(3, 4, device="meta"), 0.5)
    assert out.device.type == "meta" and out.shape == (3, 4)


@pytest.mark.parametrize(
    ("p", "error"),
    [(True, TypeError), (torch.tensor([0.2, 0.3]), TypeError), ("0.5", TypeError), (np.float64(1.01), ValueError)],
)
def test_dropout_refuses_bad_p_by_name_and_takes_numpy_and_0d_tensors(p, error):
    """torch's p types (NumPy numbers, 0-d tensors) are taken; bools, non-scalars and p outside [0, 1] are
    refused by name, in training or not."""
    x = torch.rand(20, 5) + 0.5
    for good in (np.float32(0.5), np.int64(1), torch.tensor(0.5)):
        torch.manual_seed(2)
        out = functional.dropout(x, good)
        torch.manual_seed(2)
        assert torch.equal(out, functional.dropout(x, float(good)))
    for training in (True, False):
        with pytest.raises(error, match="^p: "):
            functional.dropout(x, p, training)
