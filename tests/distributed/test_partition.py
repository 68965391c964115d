import sys

import pytest
import torch

from featgraph import Graph
from featgraph.datasets import products_like
from featgraph.distributed import METHODS, edge_cut, partition
from tests.conftest import random_edges


def small_graph(n: int = 60, e: int = 400, seed: int = 0) -> Graph:
    src, dst = random_edges(n, e, seed)
    return Graph(src, dst, n)


def two_communities(n: int = 40) -> Graph:
    """Two dense halves joined by one edge: METIS must cut only that."""
    half = n // 2
    pairs = [(u, v) for block in (range(half), range(half, n)) for u in block for v in block if u != v]
    pairs.append((0, half))
    src, dst = zip(*pairs, strict=True)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(1))  # communities not contiguous in ids
    return Graph(perm[list(src)], perm[list(dst)], n)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("num_parts", [1, 2, 4])
def test_every_vertex_in_one_part_and_parts_balanced(method, num_parts):
    g = small_graph()
    parts = partition(g, num_parts, method)
    assert parts.shape == (g.num_nodes,) and parts.dtype == torch.int64
    assert set(parts.tolist()) == set(range(num_parts))
    work = torch.bincount(parts, weights=(g.in_degrees() + 1).double(), minlength=num_parts)
    assert float(work.max()) <= 1.5 * float(work.sum()) / num_parts  # in-degree + 1 balanced


@pytest.mark.parametrize("num_parts", [2, 4])
def test_metis_balances_vertices_and_in_edges_on_skewed_degrees(num_parts):
    """The dense transforms cost per vertex, the aggregations per in-edge: both shares near equal where
    power-law degrees make balancing one alone unbalance the other."""
    g = products_like(0.01).graph
    parts = partition(g, num_parts, "metis")
    share = 1.06 / num_parts
    assert int(torch.bincount(parts, minlength=num_parts).max()) <= share * g.num_nodes
    assert int(torch.bincount(parts[g.coo()[1]], minlength=num_parts).max()) <= share * g.num_edges
    assert edge_cut(g, parts) < 0.5 * edge_cut(g, partition(g, num_parts, "random"))


def test_metis_cuts_the_bridge_only():
    g = two_communities()
    parts = partition(g, 2, "metis")
    assert edge_cut(g, parts) == 1
    assert edge_cut(g, partition(g, 2, "random")) > 20


def test_random_deterministic_per_seed():
    g = small_graph()
    assert torch.equal(partition(g, 3, "random", seed=5), partition(g, 3, "random", seed=5))
    assert not torch.equal(partition(g, 3, "random", seed=5), partition(g, 3, "random", seed=6))


def test_contiguous_is_ranges():
    parts = partition(small_graph(), 4, "contiguous")
    assert bool((parts[1:] >= parts[:-1]).all())


def test_bad_input():
    g = small_graph()
    with pytest.raises(ValueError, match="num_parts"):
        partition(g, 0)
    with pytest.raises(ValueError, match="num_parts"):
        partition(g, g.num_nodes + 1)
    with pytest.raises(ValueError, match="method"):
        partition(g, 2, "spectral")
    with pytest.raises(ValueError, match="bipartite"):
        partition(Graph([0], [0], (3, 2)), 2)
    with pytest.raises(TypeError, match="Graph"):
        partition(g.edge_index, 2)


def test_metis_without_pymetis_names_it_and_the_fallbacks(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"pymetis.*random.*contiguous"):
        partition(small_graph(), 2, "metis")
