import pytest
import torch
import torch.nn.functional as F

from featgraph.ops import dropout
from featgraph.training import MODELS, NodeClassifier, layers, preset
from featgraph.training.models import RELATIONAL_MODELS
from tests.nn.reference import N, edges


@pytest.mark.parametrize("model", MODELS)
def test_featgraph_and_pyg_models_share_parameter_names_and_outputs(model):
    pytest.importorskip("torch_geometric")
    config = preset(model, aggr="pool") if model == "sage" else preset(model)
    relations = 3 if model in RELATIONAL_MODELS else 0
    torch.manual_seed(0)
    theirs = NodeClassifier(model, 12, 4, config, "pyg", num_relations=relations).eval()
    ours = NodeClassifier(model, 12, 4, config, "featgraph", num_relations=relations).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x, edge_index = torch.randn(N, 12), edges(20)
    graph = (edge_index, torch.randint(0, 3, (edge_index.shape[1],))) if relations else (edge_index,)
    torch.testing.assert_close(ours(x, *graph), theirs(x, *graph), rtol=1e-4, atol=1e-5)
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


def test_hgt_groups_edges_by_relation_whether_or_not_they_come_sorted():
    pytest.importorskip("torch_geometric")
    net = NodeClassifier("hgt", 4, 3, preset("hgt"), "featgraph", num_relations=3)
    edge_index = torch.randint(0, 10, (2, 30), generator=torch.Generator().manual_seed(0))
    edge_type = torch.randint(0, 3, (30,), generator=torch.Generator().manual_seed(1))
    order = torch.sort(edge_type, stable=True).indices
    for index, types in ((edge_index, edge_type), (edge_index[:, order], edge_type[order])):
        grouped = net.edge_index_dict(index, types)
        for r, edge_type_name in enumerate(net.edge_types):
            torch.testing.assert_close(grouped[edge_type_name], edge_index[:, edge_type == r])
