"""``graph.conversion``: the graph an operator's arguments stand for, and the remembered graphs of users' edge
tensors."""

import pytest
import torch

import featgraph as fg
from featgraph.graph.conversion import as_graph, resolve
from featgraph.operator import graph_args
from tests.conftest import random_edges
from tests.nn.reference import edges

N, E = 12, 50
EDGES_N = 20  # the vertices of tests.nn.reference.edges()


@pytest.fixture(scope="module")
def graph():
    return fg.Graph(*random_edges(N, E, seed=20), N)


@pytest.fixture(scope="module")
def block():
    gen = torch.Generator().manual_seed(3)
    return fg.Graph(torch.randint(0, 9, (30,), generator=gen), torch.randint(0, 5, (30,), generator=gen), (9, 5))


def args_of(g, loops=False):
    edge_index, num_src, num_dst, _ = graph_args(g)
    return edge_index, num_src, num_dst, loops


def test_resolve_finds_the_graph_that_owns_the_edges(graph, block):
    for g in (graph, block):
        assert resolve(*args_of(g)) is g
    assert resolve(*args_of(graph, loops=True)) is graph.with_self_loops()
    assert graph.reverse().edge_index.shape == (2, E)  # a derived graph makes its own on first use
    assert resolve(*graph_args(graph.reverse())) is graph.reverse()


def test_resolve_remembers_a_user_edge_index_and_checks_its_contents():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    g = resolve(edge_index, 3, 3, False)
    assert g is not None and g.edge_index is not edge_index  # the graph keeps its own copy
    assert resolve(edge_index, 3, 3, False) is g
    edge_index[1, 0] = 2  # written in place: the contents no longer match, so a new graph is built
    rebuilt = resolve(edge_index, 3, 3, False)
    assert rebuilt is not g and rebuilt.coo()[1].tolist() == [2, 2, 0]
    edge_index[0, 0] = 5
    with pytest.raises(ValueError, match="edge_index: node id 5 out of range"):
        resolve(edge_index, 3, 3, False)


def test_same_edge_index_gives_the_same_graph_until_modified():
    edge_index = edges()
    g = as_graph(edge_index, EDGES_N)
    assert as_graph(edge_index, EDGES_N) is g
    assert torch.equal(torch.stack(g.coo()), edge_index)
    edge_index[0, 0] = (edge_index[0, 0] + 1) % EDGES_N  # in-place change: a new graph
    changed = as_graph(edge_index, EDGES_N)
    assert changed is not g and torch.equal(torch.stack(changed.coo()), edge_index)
    assert as_graph(edge_index.clone(), EDGES_N) is not changed


@pytest.mark.parametrize("edit", ["data", "numpy", "transposed"])
def test_edits_that_leave_the_version_counter_give_a_new_graph(edit):
    """Writes through ``.data`` or numpy do not move torch's version counter; the edges are compared
    instead (also for an edge_index that is a non-contiguous view), so a layer never runs a stale graph."""
    edge_index = edges() if edit != "transposed" else edges().t().contiguous().t()
    x = torch.randn(EDGES_N, 4)
    conv = fg.nn.GCNConv(4, 3)
    before = conv(x, edge_index)
    g = as_graph(edge_index, EDGES_N)
    version = edge_index._version
    writable = edge_index.numpy() if edit == "numpy" else edge_index.data
    writable[1, -1] = (writable[1, -1] + 1) % EDGES_N  # the last edge's destination: the last bytes compared
    assert edge_index._version == version
    changed = as_graph(edge_index, EDGES_N)
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
    g = fg.Graph.from_edge_index(edges(), EDGES_N)
    assert as_graph(g, EDGES_N) is g
    with pytest.raises(ValueError, match="the graph has 20 vertices but the features have 21 rows"):
        as_graph(g, EDGES_N + 1)
    with pytest.raises(TypeError, match="edge_index tensor or a featgraph.Graph"):
        as_graph([[0, 1], [1, 0]], 2)
    with pytest.raises(ValueError, match="out of range"):
        as_graph(edges(), EDGES_N - 10)


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


def test_same_values_compares_contents_whatever_the_layout():
    from featgraph.graph.conversion import same_values

    a = torch.arange(12)
    assert same_values(a, a.clone()) and not same_values(a, a.flip(0)) and not same_values(a, a[:11])
    b = torch.stack([a, a], 1)[:, 0]  # a non-contiguous view holding a's values
    assert not b.is_contiguous() and same_values(a, b) and same_values(b, a)
    assert not same_values(a, a.to(torch.int32) + 1) and same_values(a.to(torch.int32), a.to(torch.int32))
