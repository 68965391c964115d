import numpy as np
import pytest
import torch

from featgraph.nn import Dropout, functional

pytest.importorskip("torch_geometric")


def test_dropout_module_is_torchs_with_featgraphs_masks():
    ours, theirs = Dropout(0.3, inplace=False), torch.nn.Dropout(0.3)
    assert isinstance(ours, torch.nn.Dropout) and repr(ours) == repr(theirs)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    x = torch.randn(50, 19)
    torch.manual_seed(2)
    out = ours(x)
    torch.manual_seed(2)
    assert torch.equal(out, functional.dropout(x, 0.3))
    assert torch.equal(ours.eval()(x), x)
    y = x.clone()
    assert Dropout(0.3, inplace=True).train()(y) is y


@pytest.mark.parametrize("p", [np.float32(0.3), np.int64(0), np.int64(1), torch.tensor(0.3)])
def test_dropout_module_takes_p_as_torchs_does(p):
    """NumPy numbers and 0-d tensors, which torch.nn.Dropout accepts: the mask of the Python float."""
    x = torch.rand(40, 11) + 0.5
    torch.manual_seed(4)
    out = Dropout(p)(x)
    torch.manual_seed(4)
    assert torch.equal(out, functional.dropout(x, float(p)))
    with pytest.raises(TypeError, match="^p: "):
        Dropout(np.bool_(True))(x)


def test_dropout_module_second_order_gradient_is_torchs():
    """A gradient penalty through the module equals torch's dropout formula on featgraph's mask; a dropped
    NaN is NaN, as in torch."""
    module = Dropout(0.4)
    x = torch.randn(30, 8, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(9)
    out = module(x)
    torch.manual_seed(9)
    mask = (module(torch.ones_like(x)) != 0).double()
    assert torch.autograd.gradgradcheck(lambda t: (torch.manual_seed(9), module(t))[1], (x,))
    (g,) = torch.autograd.grad((out**3).sum(), x, create_graph=True)
    (penalty,) = torch.autograd.grad((g**2).sum(), x)
    reference = x.detach().clone().requires_grad_()
    (g_ref,) = torch.autograd.grad(((reference * mask / 0.6) ** 3).sum(), reference, create_graph=True)
    (penalty_ref,) = torch.autograd.grad((g_ref**2).sum(), reference)
    torch.testing.assert_close(penalty, penalty_ref)
    bad = torch.full((30, 8), float("nan"))
    torch.manual_seed(9)
    assert module(bad).isnan().all()
