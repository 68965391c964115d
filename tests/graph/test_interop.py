import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from tests.conftest import adjacency, random_edges, typed_edges


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


def test_from_dgl_bipartite_heterograph(dgl):
    src, dst = torch.tensor([0, 1, 1]), torch.tensor([2, 0, 4])
    g = Graph.from_dgl(dgl.heterograph({("user", "buys", "item"): (src, dst)}, {"user": 2, "item": 5}))
    assert (g.num_src_nodes, g.num_dst_nodes) == (2, 5) and torch.equal(g.coo()[1], dst)


def _typed(dgl, relations, counts, int32):
    idtype = torch.int32 if int32 else torch.int64
    data = {et: (torch.tensor(s, dtype=idtype), torch.tensor(d, dtype=idtype)) for et, (s, d) in relations.items()}
    return dgl.heterograph(data, num_nodes_dict=counts, idtype=idtype)


@st.composite
def _heterographs(draw, relations):
    """The first of ``relations`` and some others over types of 0-4 vertices, each 0-6 edges (repeats:
    duplicate edges; isolated vertices and empty relations occur)."""
    types = {t for et in relations for t in (et[0], et[2])}
    counts = {t: draw(st.integers(0, 4)) for t in sorted(types)}
    chosen = [relations[0], *draw(st.lists(st.sampled_from(relations[1:]), max_size=len(relations) - 1, unique=True))]
    edges = {}
    for src_type, rel, dst_type in chosen:
        ids = st.tuples(st.integers(0, max(counts[src_type] - 1, 0)), st.integers(0, max(counts[dst_type] - 1, 0)))
        pairs = draw(st.lists(ids, max_size=6 if counts[src_type] and counts[dst_type] else 0))
        edges[(src_type, rel, dst_type)] = ([u for u, _ in pairs], [v for _, v in pairs])
    return edges, counts


MIXED = [("a", "r2", "a"), ("a", "r0", "b"), ("b", "r1", "a"), ("c", "r3", "b")]  # a -> a: not one-way
ONE_WAY = [("user", "buys", "item"), ("user", "rates", "item"), ("shop", "sells", "item"), ("user", "likes", "tag")]


@settings(max_examples=25, deadline=None)
@given(
    graph=typed_edges(MIXED, 4, 6, min_relations=1, required=MIXED[:1]), int32=st.booleans(), seed=st.integers(0, 2**16)
)
def test_from_dgl_several_edge_types_as_dgl_to_homogeneous(dgl, graph, int32, seed):
    """Several edge types: DGL's ``to_homogeneous`` numbering and edge order, and sums over the graph equal
    DGL's own per-relation message passing summed across relations (vertex and edge rows both line up)."""
    hg = _typed(dgl, *graph, int32)
    g = Graph.from_dgl(hg)
    assert g.num_nodes == hg.num_nodes() and not g.is_bipartite
    if hg.num_edges():  # DGL's to_homogeneous fails on a graph without edges
        homogeneous = dgl.to_homogeneous(hg)
        assert torch.equal(torch.stack(g.coo()), torch.stack(homogeneous.edges(order="eid")).to(g.coo()[0].dtype))
    _check_sums(dgl, hg, g, hg.ntypes, hg.ntypes, seed)


@settings(max_examples=25, deadline=None)
@given(
    graph=typed_edges(ONE_WAY, 4, 6, min_relations=1, required=ONE_WAY[:1]),
    int32=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_from_dgl_several_edge_types_one_way_is_bipartite(dgl, graph, int32, seed):
    """Relations all from some vertex types to others (``is_unibipartite``): the sources' types, then the
    destinations' types, each numbered in DGL's type order; a block of several edge types alike."""
    hg = _typed(dgl, *graph, int32)
    g = Graph.from_dgl(hg)
    assert (g.num_src_nodes, g.num_dst_nodes) == (
        sum(hg.num_src_nodes(t) for t in hg.srctypes),
        sum(hg.num_dst_nodes(t) for t in hg.dsttypes),
    )
    _check_sums(dgl, hg, g, hg.srctypes, hg.dsttypes, seed)
    block = dgl.to_block(hg, {t: torch.arange(hg.num_nodes(t)).to(hg.idtype) for t in hg.dsttypes})
    _check_sums(dgl, block, Graph.from_dgl(block), block.srctypes, block.dsttypes, seed)


def _check_sums(dgl, hg, g, src_types, dst_types, seed):
    """``gspmm`` over ``g`` of the sources' features stacked by type (plus each edge's feature, stacked by
    relation) against DGL's ``multi_update_all`` sum on ``hg``."""
    from featgraph.ops import gspmm

    gen = torch.Generator().manual_seed(seed)
    x = {t: torch.randn(hg.num_src_nodes(t), 3, generator=gen, dtype=torch.float64) for t in src_types}
    w = {et: torch.randn(hg.num_edges(et), 1, generator=gen, dtype=torch.float64) for et in hg.canonical_etypes}
    for t, v in x.items():
        hg.srcnodes[t].data["h"] = v
    for et, v in w.items():
        hg.edges[et].data["w"] = v
    hg.multi_update_all({et: (dgl.function.u_mul_e("h", "w", "m"), dgl.function.sum("m", "out"))
                         for et in hg.canonical_etypes}, "sum")  # fmt: skip
    want = torch.cat([hg.dstnodes[t].data.get("out", torch.zeros(hg.num_dst_nodes(t), 3, dtype=torch.float64))
                      for t in dst_types])  # fmt: skip
    got = gspmm(g, "mul", "sum", torch.cat([x[t] for t in src_types]), torch.cat(list(w.values())))
    torch.testing.assert_close(got, want)


def test_is_dgl_graph(dgl):
    from featgraph.graph.interop import is_dgl_graph

    g = dgl.heterograph({("user", "buys", "item"): ([0], [1]), ("item", "sold_to", "user"): ([1], [0])})
    assert is_dgl_graph(g) and is_dgl_graph(g["buys"]) and is_dgl_graph(dgl.to_block(g, {"item": [1]}))
    for other in (Graph.from_dgl(g), {("user", "buys", "item"): ([0], [1])}, None, torch.zeros(2, 2)):
        assert not is_dgl_graph(other)


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
