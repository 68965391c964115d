import pytest
import torch

import featgraph as fg
from featgraph.nn import as_graph
from featgraph.nn.graph_input import split_input
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


@pytest.mark.parametrize("edit", ["data", "numpy", "transposed"])
def test_edits_that_leave_the_version_counter_give_a_new_graph(edit):
    """Writes through ``.data`` or numpy do not move torch's version counter; the edges are compared
    instead (also for an edge_index that is a non-contiguous view), so a layer never runs a stale graph."""
    edge_index = edges() if edit != "transposed" else edges().t().contiguous().t()
    x = torch.randn(N, 4)
    conv = fg.nn.GCNConv(4, 3)
    before = conv(x, edge_index)
    g = as_graph(edge_index, N)
    version = edge_index._version
    writable = edge_index.numpy() if edit == "numpy" else edge_index.data
    writable[1, -1] = (writable[1, -1] + 1) % N  # the last edge's destination: the last bytes compared
    assert edge_index._version == version
    changed = as_graph(edge_index, N)
    assert changed is not g and torch.equal(torch.stack(changed.coo()), edge_index)
    torch.testing.assert_close(conv(x, edge_index), conv(x, edge_index.clone()))
    assert not torch.allclose(conv(x, edge_index), before)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta", "ignore:Sparse invariant checks")
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_values_edited_through_numpy_give_a_new_graph(layout):
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.tensor([0.5, 2.0, 1.0]), (3, 3)).coalesce()
    adj_t = adj_t if layout == "coo" else adj_t.to_sparse_csr()
    g = as_graph(adj_t, 3)
    values = adj_t._values() if layout == "coo" else adj_t.values()
    values.numpy()[1] = 4.0
    changed = as_graph(adj_t, 3)
    assert changed is not g and float(changed.edge_weight[1]) == 4.0
    assert as_graph(adj_t, 3) is changed


def test_graph_passes_through_and_is_checked():
    g = fg.Graph.from_edge_index(edges(), N)
    assert as_graph(g, N) is g
    with pytest.raises(ValueError, match="the graph has 20 vertices but the features have 21 rows"):
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
    learnable = torch.sparse_coo_tensor(edge_index.flip(0), weight.requires_grad_(), (3, 3))
    with pytest.raises(ValueError, match="adj_t: its values require grad"):
        as_graph(learnable, 3)


def test_split_input_reads_pyg_bipartite_forms_and_blocks():
    edge_index = torch.stack([torch.tensor([0, 4, 6, 6]), torch.tensor([0, 1, 2, 0])])
    x_src, x_dst = torch.randn(7, 3), torch.randn(3, 2)
    got_src, got_dst, g = split_input((x_src, x_dst), edge_index)
    assert got_src is x_src and got_dst is x_dst and (g.num_src_nodes, g.num_dst_nodes) == (7, 3)
    _, none, g = split_input((x_src, None), edge_index, size=(7, 3))
    assert none is None and g.is_bipartite
    _, prefix, g = split_input(x_src, edge_index, size=(7, 3))  # one tensor: the destinations lead the sources
    assert torch.equal(prefix, x_src[:3]) and (g.num_src_nodes, g.num_dst_nodes) == (7, 3)
    block = fg.Graph.from_edge_index(edge_index, size=(7, 3))
    _, prefix, g = split_input(x_src, block)
    assert g is block and torch.equal(prefix, x_src[:3])
    _, same, g = split_input(x_src, torch.stack([edge_index[0], edge_index[0]]))
    assert same.shape == x_src.shape and not g.is_bipartite


@pytest.mark.parametrize(
    ("x", "size", "message"),
    [
        ((torch.randn(7, 3), torch.randn(5, 2)), None, "x_dst: expected 3 rows"),
        ((torch.randn(7, 3), torch.randn(3, 2), torch.randn(1)), None, "a pair"),
        (torch.randn(6, 3), (7, 3), "size=\\(7, 3\\)"),
        ((torch.randn(6, 3), torch.randn(3, 2)), None, "source id 6 out of range"),
    ],
)
def test_split_input_names_what_does_not_fit(x, size, message):
    edge_index = torch.stack([torch.tensor([0, 4, 6, 6]), torch.tensor([0, 1, 2, 0])])
    graph = fg.Graph.from_edge_index(edge_index, size=(7, 3)) if message.startswith("x_dst") else edge_index
    with pytest.raises(ValueError, match=message):
        split_input(x, graph, size)


def test_pyg_edge_index_passed_again_is_compared_by_content():
    """PyG's ``EdgeIndex`` reports data pointer 0; passing the same one twice (every epoch of a training loop) is
    checked by content instead of by memcmp on that pointer, which crashed the process."""
    from torch_geometric import EdgeIndex

    from featgraph.nn import GCNConv

    edge_index = EdgeIndex(edges(), sparse_size=(N, N))
    conv = GCNConv(5, 3)
    x = torch.randn(N, 5)
    first = conv(x, edge_index)
    torch.testing.assert_close(conv(x, edge_index), first)
    torch.testing.assert_close(first, conv(x, edge_index.as_tensor().clone()))
