import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.datasets.synthetic import community
from featgraph.graph.reorder import METHODS, inverse_order, locality_order, propagated_labels
from tests.conftest import adjacency


def bandwidth(src: torch.Tensor, dst: torch.Tensor) -> int:
    return int((src - dst).abs().max()) if src.numel() else 0


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    edges=st.lists(st.tuples(st.integers(0, 59), st.integers(0, 59)), max_size=200),
    method=st.sampled_from(METHODS),
    weighted=st.booleans(),
)
def test_a_reordered_graph_is_the_same_graph_relabelled(n, edges, method, weighted):
    pairs = [(u % n, v % n) for u, v in edges]  # duplicates, self loops and isolated vertices as drawn
    src = torch.tensor([u for u, _ in pairs], dtype=torch.int64)
    dst = torch.tensor([v for _, v in pairs], dtype=torch.int64)
    weight = torch.rand(len(pairs), dtype=torch.float64) if weighted else None
    g = Graph(src, dst, n, edge_weight=weight)
    before = (src.clone(), dst.clone())
    reordered, order = g.reordered(method)
    assert sorted(order.tolist()) == list(range(n))  # a permutation of every vertex
    values = None if weight is None else weight.numpy()
    want = adjacency(src, dst, n, values).toarray()
    r_src, r_dst = reordered.coo()
    got = adjacency(r_src, r_dst, n, None if weight is None else reordered.edge_weight.numpy()).toarray()
    perm = order.numpy()
    np.testing.assert_array_equal(got, want[np.ix_(perm, perm)])  # row i of the new graph is old row order[i]
    assert torch.equal(inverse_order(order)[order], torch.arange(n))
    assert g.reordered(method)[0] is reordered  # kept with the graph
    assert torch.equal(src, before[0]) and torch.equal(dst, before[1])


def test_rcm_narrows_a_scrambled_path_to_its_band():
    n = 500
    relabel = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    path = torch.arange(n - 1)
    g = Graph(relabel[path], relabel[path + 1], n)
    reordered, _ = g.reordered("rcm")
    assert bandwidth(*g.coo()) > 100 and bandwidth(*reordered.coo()) == 1
    matrix = adjacency(*reordered.coo(), n)
    assert (sp.triu(matrix, 2).nnz + sp.tril(matrix, -2).nnz) == 0


def test_community_order_makes_communities_contiguous_and_fills_tiles():
    g = community(2_048, 24, community_size=64, within=0.9, seed=1)
    labels = propagated_labels(*g.coo(), g.num_nodes)
    assert labels.unique().numel() <= 2 * 2_048 // 64  # the planted communities, give or take splits
    ordered, order = g.reordered("community")
    runs = (labels[order].diff() != 0).sum().item() + 1
    assert runs == labels.unique().numel()  # each community one run of ids
    given_fill, rcm_fill = g.tc_translation(16).fill(), g.reordered("rcm")[0].tc_translation(16).fill()
    assert ordered.tc_translation(16).fill() > max(2 * given_fill, 1.4 * rcm_fill)


def test_bad_input_is_refused_by_name():
    g = Graph(torch.tensor([0, 1]), torch.tensor([1, 2]), 3)
    with pytest.raises(ValueError, match="method must be one of"):
        g.reordered("metis")
    with pytest.raises(ValueError, match="bipartite"):
        Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), (2, 3)).reordered()
    with pytest.raises(ValueError, match="method must be one of"):
        locality_order(torch.tensor([0]), torch.tensor([0]), 1, "degree")


def test_an_empty_graph_has_the_identity_order():
    for method in METHODS:
        reordered, order = Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 4).reordered(
            method
        )
        assert sorted(order.tolist()) == [0, 1, 2, 3] and reordered.num_edges == 0
