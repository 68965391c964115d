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
