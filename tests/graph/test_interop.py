import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from featgraph import Graph
from tests.conftest import adjacency, random_edges


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc", "lil", "dok", "bsr"])
def test_from_scipy_any_format_keeps_adjacency_and_weights(fmt):
    n = 30
    src, dst = random_edges(n, 150, seed=11)
    ref = adjacency(src, dst, n, np.random.default_rng(0).random(150).astype(np.float32))
    g = Graph.from_scipy(ref.asformat(fmt))
    s, d = g.coo()
    rebuilt = adjacency(s, d, n, g.edge_weight.numpy())
    assert abs(rebuilt - ref).max() < 1e-6
    assert g.num_nodes == n


def test_from_scipy_rejects_non_square_and_dense():
    with pytest.raises(ValueError, match="square"):
        Graph.from_scipy(sp.random(3, 4, density=0.5, format="csr"))
    with pytest.raises(TypeError, match="scipy sparse"):
        Graph.from_scipy(np.eye(3))


def test_from_networkx_directed_and_undirected():
    und = nx.karate_club_graph()
    g = Graph.from_networkx(und)
    assert g.num_nodes == 34 and g.num_edges == 2 * und.number_of_edges()
    dense = adjacency(*g.coo(), 34).toarray()
    assert np.array_equal(dense, dense.T)
    assert np.array_equal(dense > 0, nx.to_numpy_array(und) > 0)
    di = nx.DiGraph([(0, 1), (1, 2)])
    nx.set_edge_attributes(di, {(0, 1): 0.5, (1, 2): 2.0}, "w")
    g = Graph.from_networkx(di, weight="w")
    assert g.coo()[0].tolist() == [0, 1] and g.edge_weight.tolist() == [0.5, 2.0]
    with pytest.raises(ValueError, match="0..n-1"):
        Graph.from_networkx(nx.Graph([("a", "b")]))


def test_from_pyg_data():
    torch_geometric = pytest.importorskip("torch_geometric")
    src, dst = random_edges(20, 60, seed=12)
    data = torch_geometric.data.Data(edge_index=torch.stack([src, dst]), num_nodes=25)
    g = Graph.from_pyg(data)
    assert g.num_nodes == 25 and torch.equal(g.coo()[0], src)


@pytest.fixture(scope="module")
def dgl():
    from featgraph.graph.interop import import_dgl

    module = import_dgl()
    if module is None:
        pytest.skip("DGL is not installed")
    return module


def test_from_dgl_graph(dgl):
    src, dst = random_edges(20, 60, seed=13)
    g = Graph.from_dgl(dgl.graph((src, dst), num_nodes=22))
    assert g.num_nodes == 22 and torch.equal(g.coo()[1], dst)


def test_from_dgl_block_is_bipartite_and_aggregates_as_dgl(dgl):
    """A block from DGL's sampling (sources: the destinations first, then their sampled neighbours) keeps DGL's
    source and destination counts and edge order; sums over it match DGL's own message passing."""
    from featgraph.ops import gspmm

    src, dst = random_edges(30, 200, seed=14)
    seeds = torch.tensor([3, 7, 11, 29])
    block = dgl.to_block(dgl.sampling.sample_neighbors(dgl.graph((src, dst), num_nodes=30), seeds, 4), seeds)
    g = Graph.from_dgl(block)
    assert (g.num_src_nodes, g.num_dst_nodes) == (block.num_src_nodes(), block.num_dst_nodes()) and g.is_bipartite
    assert torch.equal(torch.stack(g.coo()), torch.stack(block.edges(order="eid")))
    x = torch.randn(block.num_src_nodes(), 5, dtype=torch.float64)
    block.srcdata["h"] = x
    block.update_all(dgl.function.copy_u("h", "m"), dgl.function.sum("m", "out"))
    torch.testing.assert_close(gspmm(g, "copy_lhs", "sum", x, None), block.dstdata["out"])


def test_from_dgl_bipartite_heterograph_and_refusal_of_several_edge_types(dgl):
    src, dst = torch.tensor([0, 1, 1]), torch.tensor([2, 0, 4])
    g = Graph.from_dgl(dgl.heterograph({("user", "buys", "item"): (src, dst)}, {"user": 2, "item": 5}))
    assert (g.num_src_nodes, g.num_dst_nodes) == (2, 5) and torch.equal(g.coo()[1], dst)
    two = dgl.heterograph({("user", "buys", "item"): (src, dst), ("item", "sold_to", "user"): (dst, src)})
    with pytest.raises(ValueError, match="one edge type"):
        Graph.from_dgl(two)


@pytest.mark.parametrize("layout", [torch.sparse_csr, torch.sparse_coo])
def test_from_pyg_data_stored_as_a_sparse_adj_t(layout):
    """A ``Data`` after PyG's ``ToSparseTensor`` (``adj_t``, its ``edge_weight`` moved into the values): the
    graph of PyG's coalesced ``edge_index`` sorted by destination, weighted by the values; an ``adj`` alike."""
    torch_geometric = pytest.importorskip("torch_geometric")
    from torch_geometric.utils import coalesce

    src, dst = random_edges(20, 60, seed=12)
    weight = torch.rand(60)
    data = torch_geometric.data.Data(edge_index=torch.stack([src, dst]), edge_weight=weight, num_nodes=25)
    sparse = torch_geometric.transforms.ToSparseTensor(layout=layout)(data.clone())
    edge_index, edge_weight = coalesce(data.edge_index, weight, num_nodes=25, sort_by_row=False)
    g = Graph.from_pyg(sparse)
    assert g.num_nodes == 25 and torch.equal(torch.stack(g.coo()), edge_index)
    torch.testing.assert_close(g.edge_weight, edge_weight)
    unweighted = torch_geometric.transforms.ToSparseTensor(layout=layout)(data.clone().update({"edge_weight": None}))
    assert Graph.from_pyg(unweighted).edge_weight is None  # all values 1: no weights, as a layer's adj_t reads
    adj = torch_geometric.data.Data(adj=sparse.adj_t.to_sparse_coo().t().coalesce(), num_nodes=25)
    assert torch.equal(torch.stack(Graph.from_pyg(adj).coo()), coalesce(data.edge_index, num_nodes=25))
    with pytest.raises(ValueError, match=r"data: holds no edges \(no edge_index, adj_t or adj\)"):
        Graph.from_pyg(torch_geometric.data.Data(num_nodes=3))
