import pytest
import torch
import torch.nn.functional as F

from featgraph.ops import dropout
from featgraph.training import MODELS, NodeClassifier, layers, preset
from tests.nn.reference import N, edges


@pytest.mark.parametrize("model", MODELS)
def test_featgraph_and_pyg_models_share_parameter_names_and_outputs(model):
    pytest.importorskip("torch_geometric")
    config = preset(model, aggr="pool") if model == "sage" else preset(model)
    torch.manual_seed(0)
    theirs = NodeClassifier(model, 12, 4, config, "pyg").eval()
    ours = NodeClassifier(model, 12, 4, config, "featgraph").eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x, edge_index = torch.randn(N, 12), edges(20)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index), rtol=1e-4, atol=1e-5)
    assert ours.drop is dropout and theirs.drop is F.dropout


def test_presets_and_errors():
    assert preset("gat").heads == 8 and preset("gcn", hidden=32, lr=None).hidden == 32
    assert preset("gcn", lr=None).lr == 0.01
    with pytest.raises(ValueError, match="model must be one of"):
        preset("transformer")
    with pytest.raises(ValueError, match="backend must be one of"):
        layers("jax")
    with pytest.raises(ValueError, match="model must be one of"):
        NodeClassifier("transformer", 4, 2, preset("gcn"), "featgraph")
