import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import featgraph as fg
from featgraph.graph.hetero import HeteroGraph, with_reverse_edges
from featgraph.graph.interop import import_dgl

EDGES = {
    ("paper", "cites", "paper"): torch.tensor([[0, 1, 1, 2, 2], [1, 2, 2, 2, 0]]),  # duplicate edge, self loop
    ("author", "writes", "paper"): torch.tensor([[0, 1, 3], [0, 0, 2]]),  # bipartite
    ("paper", "written_by", "author"): torch.zeros(2, 0, dtype=torch.int64),  # empty relation
    ("author", "knows", "author"): torch.tensor([[3], [0]]),
}
COUNTS = {"paper": 3, "author": 5, "venue": 2}  # author 2, 4 and both venues are isolated


@pytest.fixture
def hg():
    return HeteroGraph(EDGES, COUNTS)


def test_node_types_get_offsets_and_edges_are_sorted_by_relation(hg):
    assert hg.node_types == ("paper", "author", "venue")
    assert hg.edge_types == tuple(EDGES)
    assert hg.node_offsets.tolist() == [0, 3, 8, 10]
    assert hg.edge_offsets.tolist() == [0, 5, 8, 8, 9]
    assert hg.num_nodes == 10 and hg.num_edges == 9 and hg.num_relations == 4
    assert hg.ntype.tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 2, 2]
    assert hg.etype.tolist() == [0] * 5 + [1] * 3 + [3]
    src, dst = hg.graph.coo()
    want_src = [0, 1, 1, 2, 2, 3 + 0, 3 + 1, 3 + 3, 3 + 3]
    want_dst = [1, 2, 2, 2, 0, 0, 0, 2, 3 + 0]
    assert src.tolist() == want_src and dst.tolist() == want_dst
    assert hg.perm.tolist() == list(range(9))
    assert hg.node_offset("author") == 3


def test_relation_views_are_local_and_bipartite_where_types_differ(hg):
    writes = hg.relation("writes")
    assert (writes.num_src_nodes, writes.num_dst_nodes) == (5, 3)
    assert torch.equal(torch.stack(writes.coo()), EDGES[("author", "writes", "paper")])
    cites = hg.relation(("paper", "cites", "paper"))
    assert not cites.is_bipartite and cites.num_nodes == 3
    empty = hg.relation("written_by")
    assert empty.num_edges == 0 and (empty.num_src_nodes, empty.num_dst_nodes) == (3, 5)
    assert hg.num_edges_of("cites") == 5 and hg.edge_slice("writes") == slice(5, 8)


def test_edge_index_dict_round_trips(hg):
    back = hg.to_edge_index_dict()
    assert list(back) == list(EDGES)
    for key, edges in EDGES.items():
        assert torch.equal(back[key], edges)
    again = HeteroGraph(back, hg.num_nodes_dict)
    assert torch.equal(again.graph.edge_index, hg.graph.edge_index)


def test_features_stack_and_split(hg):
    features = {t: torch.randn(n, 7) for t, n in COUNTS.items()}
    x = hg.stack(features)
    assert x.shape == (10, 7)
    assert torch.equal(x[3:8], features["author"])
    parts = hg.split(x)
    assert list(parts) == list(COUNTS) and all(torch.equal(parts[t], features[t]) for t in COUNTS)
    graph, ntype, etype, stacked = hg.to_homogeneous(features)
    assert graph is hg.graph and torch.equal(stacked, x) and ntype is hg.ntype and etype is hg.etype
    values = torch.arange(9.0)
    assert hg.edge_split(values)[("author", "writes", "paper")].tolist() == [5.0, 6.0, 7.0]


def test_from_dgl_dicts_and_inferred_counts():
    data = {
        ("user", "follows", "user"): (torch.tensor([0, 1]), torch.tensor([1, 2])),
        ("user", "plays", "game"): ([0, 3], [1, 0]),
    }
    hg = fg.HeteroGraph.from_dgl(data)
    assert hg.num_nodes_dict == {"user": 4, "game": 2}
    assert hg.to_edge_index_dict()[("user", "plays", "game")].tolist() == [[0, 3], [1, 0]]
    hg = fg.HeteroGraph.from_dgl(data, {"user": 6, "game": 3})
    assert hg.num_nodes == 9


def test_from_dgl_takes_empty_relations_and_numpy_counts_as_dgl_does():
    """DGL's empty relation written ``([], [])`` (torch reads ``[]`` as float32) and counts as NumPy integers or
    0-d tensors, as ``dgl.heterograph`` takes them; a DGL graph built from them, where DGL is installed, gives
    the same typed graph."""
    data = {
        ("user", "follows", "user"): ([], []),
        ("user", "plays", "game"): (np.array([0, 3]), [1, 0]),
        ("game", "liked_by", "user"): (np.array([]), ()),
    }
    counts = {"user": np.int64(5), "game": np.int32(2)}
    hg = fg.HeteroGraph.from_dgl(data, counts)
    assert hg.num_nodes_dict == {"user": 5, "game": 2} and all(type(n) is int for n in hg.num_nodes_dict.values())
    assert [hg.num_edges_of(et) for et in hg.edge_types] == [0, 2, 0]
    assert hg.to_edge_index_dict()[("user", "follows", "user")].dtype == torch.int64
    assert hg.to_edge_index_dict()[("user", "plays", "game")].tolist() == [[0, 3], [1, 0]]
    assert fg.HeteroGraph.from_dgl(data).num_nodes_dict == {"user": 4, "game": 2}  # inferred: largest id + 1
    assert fg.HeteroGraph.from_dgl(data, {"user": torch.tensor(5), "game": 2}).num_nodes == 7
    assert fg.HeteroGraph({("a", "r", "a"): [[], []]}, {"a": np.uint8(3)}).num_edges == 0  # PyG's edge_index too
    dgl = import_dgl()
    if dgl is not None:
        theirs = fg.HeteroGraph.from_dgl(dgl.heterograph(data, counts))  # DGL sorts the types by name
        assert theirs.num_nodes_dict == hg.num_nodes_dict and set(theirs.edge_types) == set(hg.edge_types)
        mine = hg.to_edge_index_dict()
        for edge_type, edge_index in theirs.to_edge_index_dict().items():
            assert torch.equal(edge_index, mine[edge_type]), edge_type


def test_from_pyg_hetero_data(hg):
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for node_type, count in COUNTS.items():
        data[node_type].num_nodes = count
    data["paper"].x = torch.randn(3, 4)
    for key, edges in EDGES.items():
        data[key].edge_index = edges
    got = fg.HeteroGraph.from_pyg(data)
    assert got.node_types == hg.node_types and got.edge_types == hg.edge_types
    assert torch.equal(got.graph.edge_index, hg.graph.edge_index)
    assert torch.equal(got.etype, hg.etype)
    with pytest.raises(TypeError, match="data: expected a PyG HeteroData"):
        fg.HeteroGraph.from_pyg(torch.zeros(2, 2))


def test_from_typed_edges_sorts_stably_and_keeps_the_permutation():
    edge_index = torch.tensor([[0, 1, 2, 3, 0, 1], [1, 2, 3, 0, 2, 3]])
    edge_type = torch.tensor([2, 0, 2, 1, 0, 2])
    before = (edge_index.clone(), edge_type.clone())
    hg = fg.HeteroGraph.from_typed_edges(edge_index, edge_type, num_nodes=5, num_relations=4)
    assert hg.perm.tolist() == [1, 4, 3, 0, 2, 5]
    assert hg.etype.tolist() == [0, 0, 1, 2, 2, 2]
    assert torch.equal(hg.graph.edge_index, edge_index[:, hg.perm])
    assert hg.edge_offsets.tolist() == [0, 2, 3, 6, 6] and hg.num_edges_of("3") == 0
    assert torch.equal(edge_index, before[0]) and torch.equal(edge_type, before[1])
    with pytest.raises(ValueError, match=r"edge_type: ids must lie in \[0, 2\)"):
        fg.HeteroGraph.from_typed_edges(edge_index, edge_type, num_nodes=5, num_relations=2)
    with pytest.raises(ValueError, match="edge_type: expected 6 entries"):
        fg.HeteroGraph.from_typed_edges(edge_index, edge_type[:3], num_nodes=5)


def test_the_callers_tensors_are_not_modified_or_aliased():
    edges = {key: value.clone() for key, value in EDGES.items()}
    hg = HeteroGraph(edges, COUNTS)
    for key in EDGES:
        assert torch.equal(edges[key], EDGES[key])
    assert hg.graph.edge_index.data_ptr() != edges[("paper", "cites", "paper")].data_ptr()


@pytest.mark.parametrize(
    ("edges", "counts", "error", "match"),
    [
        ({("paper", "cites", "paper"): torch.tensor([[0], [3]])}, {"paper": 3}, ValueError,
         r"edges\[\('paper', 'cites', 'paper'\)\]: destination id 3 out of range for node type 'paper' of 3"),
        ({("paper", "cites", "paper"): torch.tensor([[-1], [0]])}, {"paper": 3}, ValueError, "source id -1"),
        ({("paper", "cites", "venue"): torch.tensor([[0], [0]])}, {"paper": 3}, ValueError,
         "names the destination node type 'venue', which num_nodes_dict does not have"),
        ({("paper", "cites"): torch.tensor([[0], [0]])}, {"paper": 3}, TypeError, "string triples"),
        ({("paper", "cites", "paper"): torch.tensor([0, 1])}, {"paper": 3}, ValueError, r"shape \(2, E\)"),
        ({("paper", "cites", "paper"): torch.tensor([[0.0], [1.0]])}, {"paper": 3}, TypeError, "integer ids"),
        ({("paper", "cites", "paper"): ([0, 1], [1])}, {"paper": 3}, ValueError, "differ in length"),
        ({}, {"paper": -1}, ValueError, r"num_nodes_dict\['paper'\]"),
        ({}, {"paper": np.int64(-1)}, ValueError, r"num_nodes_dict\['paper'\]: expected a non-negative int, got -1"),
        ({}, {"paper": True}, TypeError, r"num_nodes_dict\['paper'\]: expected a non-negative int, got True"),
        ({}, {"paper": np.bool_(True)}, TypeError, r"num_nodes_dict\['paper'\]: expected a non-negative int"),
        ({}, {"paper": torch.tensor(True)}, TypeError, r"num_nodes_dict\['paper'\]: expected a non-negative int"),
        ({}, {"paper": np.float64(3.0)}, TypeError, r"num_nodes_dict\['paper'\]: expected a non-negative int"),
        ({("paper", "cites", "paper"): ([0.5], [1])}, {"paper": 3}, TypeError, "src_ids: expected integer ids"),
        ({("paper", "cites", "paper"): (torch.zeros(0), [])}, {"paper": 3}, TypeError, "src_ids: .*torch.float32"),
        ([], None, TypeError, "edges: expected a dict"),
    ],
)  # fmt: skip
def test_bad_input_names_the_argument(edges, counts, error, match):
    with pytest.raises(error, match=match):
        HeteroGraph(edges, counts)


def test_bad_lookups_name_the_argument(hg):
    with pytest.raises(KeyError, match="edge_type: no edge type with the relation 'likes'"):
        hg.relation("likes")
    with pytest.raises(KeyError, match="unknown edge type"):
        hg.relation(("paper", "likes", "paper"))
    with pytest.raises(KeyError, match=r"features: no tensor for node type\(s\) \['venue'\]"):
        hg.stack({"paper": torch.zeros(3, 2), "author": torch.zeros(5, 2)})
    with pytest.raises(ValueError, match=r"features\['paper'\]: expected 3 rows"):
        hg.stack({"paper": torch.zeros(4, 2), "author": torch.zeros(5, 2), "venue": torch.zeros(2, 2)})
    with pytest.raises(ValueError, match="feature shapes differ"):
        hg.stack({"paper": torch.zeros(3, 2), "author": torch.zeros(5, 3), "venue": torch.zeros(2, 2)})
    with pytest.raises(ValueError, match="x: expected a tensor of 10 rows"):
        hg.split(torch.zeros(9, 2))


def test_importing_featgraph_does_not_import_pyg():
    code = "import sys, featgraph; featgraph.HeteroGraph; assert 'torch_geometric' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reverse_edges_are_added_under_pygs_names():
    writes = torch.tensor([[0, 1, 1], [2, 0, 3]])
    edges = with_reverse_edges({("author", "writes", "paper"): writes})
    assert list(edges) == [("author", "writes", "paper"), ("paper", "rev_writes", "author")]
    assert torch.equal(edges[("paper", "rev_writes", "author")], writes.flip(0))


class FakeSparseTensor:
    """What ``from_pyg`` reads of a ``torch_sparse.SparseTensor`` (not installed here): ``coo()`` and
    ``sparse_sizes()``, its entries in the stored order."""

    def __init__(self, row, col, value, sparse_sizes):
        self.row, self.col, self.value, self.sizes = row, col, value, tuple(sparse_sizes)

    def coo(self):
        return self.row, self.col, self.value

    def sparse_sizes(self):
        return self.sizes


def _random_hetero_data(counts, edges_per_type, seed):
    from torch_geometric.data import HeteroData

    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    for node_type, count in counts.items():
        data[node_type].num_nodes = count
    for (src_type, rel, dst_type), count in edges_per_type.items():
        if counts[src_type] and counts[dst_type]:
            src = torch.randint(0, counts[src_type], (count,), generator=gen)
            dst = torch.randint(0, counts[dst_type], (count,), generator=gen)
            data[src_type, rel, dst_type].edge_index = torch.stack([src, dst])
            data[src_type, rel, dst_type].edge_weight = torch.rand(count, generator=gen)
    return data


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.lists(st.integers(0, 12), min_size=3, max_size=3),
    st.sampled_from(["csr", "coo", "adj", "sparse_tensor"]),
    st.integers(0, 2**16),
)
def test_from_pyg_reads_a_sparse_adjacency_as_pygs_edge_index(papers, authors, sizes, storage, seed):
    """A ``HeteroData`` stored as PyG's ``ToSparseTensor`` writes it (``adj_t``, CSR or COO) gives the graph of
    PyG's own coalesced ``edge_index`` sorted by destination (the adj_t's entries in their stored order, which
    PyG's per-edge values follow); an ``adj`` (``A[src, dst]``) and a ``SparseTensor`` read alike."""
    transforms = pytest.importorskip("torch_geometric.transforms")
    from torch_geometric.utils import coalesce

    counts = {"paper": papers, "author": authors}
    types = [("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "rev_writes", "author")]
    data = _random_hetero_data(counts, dict(zip(types, sizes, strict=True)), seed)
    reference = data.clone()
    for edge_type in reference.edge_types:
        store = reference[edge_type]
        by_row = storage == "adj"  # an adj's stored order is by source
        store.edge_index = coalesce(store.edge_index, num_nodes=max(papers, authors), sort_by_row=by_row)
    layout = torch.sparse_coo if storage == "coo" else torch.sparse_csr
    stored = transforms.ToSparseTensor(layout=layout)(data.clone())
    for edge_type in stored.edge_types:
        adj_t, edge_index = stored[edge_type].adj_t, reference[edge_type].edge_index
        if storage == "adj":
            del stored[edge_type].adj_t
            stored[edge_type].adj = adj_t.to_sparse_coo().t().coalesce()
        elif storage == "sparse_tensor":
            stored[edge_type].adj_t = FakeSparseTensor(edge_index[1], edge_index[0], None, tuple(adj_t.shape))
    got, want = HeteroGraph.from_pyg(stored), HeteroGraph.from_pyg(reference)
    assert got.num_nodes_dict == want.num_nodes_dict and got.edge_types == want.edge_types
    assert torch.equal(got.graph.edge_index, want.graph.edge_index) and torch.equal(got.etype, want.etype)


@pytest.mark.parametrize(
    "key, value, error, message",
    [
        ("adj_t", torch.eye(3, 2).to_sparse_bsr((1, 1)), TypeError, r"adj_t: expected a torch sparse COO, CSR or CSC"),
        ("adj_t", torch.eye(3, 2), TypeError, r"adj_t: expected .* got torch.strided"),
        ("adj_t", [[0, 1]], TypeError, r"adj_t: expected .* got list"),
        ("adj_t", torch.eye(2, 3).to_sparse_csr(), ValueError, r"adj_t: shape \(2, 3\) does not match .*: \(3, 2\)"),
        ("adj", torch.eye(3, 2).to_sparse(), ValueError, r"adj: shape \(3, 2\) does not match .*: \(2, 3\)"),
        ("adj_t", torch.ones(3, 2, 4).to_sparse(2), ValueError, r"adj_t: expected a 2-D sparse matrix"),
        ("adj_t", torch.ones(3, 2, 4).to_sparse(3), ValueError, r"adj_t: expected a 2-D sparse matrix"),
        ("edge_index", torch.eye(2, 2).to_sparse(), TypeError, r"edge_index: expected a \(2, E\) tensor"),
    ],
)
def test_from_pyg_names_an_edge_storage_it_cannot_read(key, value, error, message):
    """An ``adj_t`` (``adj``) that is no sparse matrix, of another layout or of the wrong shape: refused by name."""
    from torch_geometric.data import HeteroData

    data = HeteroData()
    data["paper"].num_nodes, data["author"].num_nodes = 3, 2
    data["author", "writes", "paper"][key] = value
    with pytest.raises(error, match=rf"data\[\('author', 'writes', 'paper'\)\]\.{message}"):
        HeteroGraph.from_pyg(data)


FORMS = {
    "tensors": lambda ids: torch.tensor(ids, dtype=torch.int64),
    "int32 tensors": lambda ids: torch.tensor(ids, dtype=torch.int32),
    "numpy": lambda ids: np.array(ids, dtype=np.int64),
    "lists": list,
    "tuples": tuple,
}


@settings(max_examples=40, deadline=None)
@given(
    relations=st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4)), max_size=12), min_size=1, max_size=3),
    form=st.sampled_from(list(FORMS)),
    count_type=st.sampled_from([int, np.int64, np.int32, torch.tensor]),
)
def test_property_from_dgl_takes_every_form_dgl_does(relations, form, count_type):
    """A dict of (src, dst) per canonical edge type, in each form ``dgl.heterograph`` takes (tensors of
    either id type, NumPy arrays, lists, tuples, empty ones), with node counts as ints, NumPy integers or 0-d
    tensors: the same typed graph as its edges given as int64 edge_index, and as DGL's graph where DGL imports."""
    types = [("user", f"r{k}", "item") for k in range(len(relations))]
    data = {
        et: (FORMS[form]([u for u, _ in pairs]), FORMS[form]([v for _, v in pairs]))
        for et, pairs in zip(types, relations, strict=True)
    }
    counts = {"user": count_type(7), "item": count_type(5)}
    hg = fg.HeteroGraph.from_dgl(data, counts)
    assert hg.num_nodes_dict == {"user": 7, "item": 5}
    for et, pairs in zip(types, relations, strict=True):
        edge_index = hg.to_edge_index_dict()[et]
        assert edge_index.dtype == torch.int64 and edge_index.t().tolist() == [list(p) for p in pairs]
    dgl = import_dgl()
    if dgl is not None:
        theirs = fg.HeteroGraph.from_dgl(dgl.heterograph(data, {"user": 7, "item": 5}))
        assert theirs.num_nodes_dict == hg.num_nodes_dict
        mine = hg.to_edge_index_dict()
        for et, edge_index in theirs.to_edge_index_dict().items():
            assert torch.equal(edge_index, mine[et]), et
