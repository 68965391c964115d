"""``graph.conversion``: the graph an operator's arguments stand for, and the remembered graphs of users' edge
tensors."""

import pytest
import torch

import featgraph as fg
from featgraph.graph.conversion import resolve
from featgraph.operator import graph_args
from tests.conftest import random_edges

N, E = 12, 50


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


