import pytest
import torch

import featgraph as fg
from featgraph.nn import as_graph
from tests.nn.reference import N, edges


def test_same_edge_index_gives_the_same_graph_until_modified():
    edge_index = edges()
    g = as_graph(edge_index, N)
    assert as_graph(edge_index, N) is g
    assert torch.equal(torch.stack(g.coo()), edge_index)
    edge_index[0, 0] = (edge_index[0, 0] + 1) % N  # in-place change: a new graph
    changed = as_graph(edge_index, N)
    assert changed is not g and torch.equal(torch.stack(changed.coo()), edge_index)
    assert as_graph(edge_index.clone(), N) is not changed


def test_graph_passes_through_and_is_checked():
    g = fg.Graph.from_edge_index(edges(), N)
    assert as_graph(g, N) is g
    with pytest.raises(ValueError, match="vertices but x has"):
        as_graph(g, N + 1)
    with pytest.raises(TypeError, match="edge_index tensor or a featgraph.Graph"):
        as_graph([[0, 1], [1, 0]], 2)
    with pytest.raises(ValueError, match="out of range"):
        as_graph(edges(), N - 10)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta", "ignore:Sparse invariant checks")
def test_sparse_adj_t_is_transposed_and_keeps_weights():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    weight = torch.tensor([0.5, 2.0, 1.0])
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), weight, (3, 3)).to_sparse_csr()
    g = as_graph(adj_t, 3)
    x = torch.randn(3, 2)
    expected = torch.zeros(3, 2).index_add_(0, edge_index[1], x[edge_index[0]] * weight.unsqueeze(1))
    torch.testing.assert_close(g.adjacency(g.edge_weight) @ x, expected)
    unweighted = as_graph(torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(3), (3, 3)), 3)
    assert unweighted.edge_weight is None
