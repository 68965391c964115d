import torch

from featgraph import Graph
from featgraph.graph.hilbert import hilbert_index
from tests.conftest import random_edges


def test_hilbert_index_walks_the_grid_in_unit_steps():
    for order in (1, 2, 3, 5):
        side = 1 << order
        xs, ys = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
        d = hilbert_index(xs.flatten(), ys.flatten(), order)
        assert sorted(d.tolist()) == list(range(side * side))  # a bijection onto 0..side^2-1
        walk = torch.argsort(d)
        steps = xs.flatten()[walk].diff().abs() + ys.flatten()[walk].diff().abs()
        assert torch.all(steps == 1)  # consecutive cells are neighbours: the defining property


def test_hilbert_edge_order_is_a_permutation_in_curve_order():
    src, dst = random_edges(100, 1000, seed=4)
    g = Graph(src, dst, 100)
    order = g.edge_order("hilbert")
    assert sorted(order.tolist()) == list(range(1000))
    d = hilbert_index(src[order], dst[order], 7)
    assert torch.all(d[:-1] <= d[1:])
