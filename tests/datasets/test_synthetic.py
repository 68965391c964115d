import numpy as np
import pytest
import torch

from featgraph.datasets import rand100k, rmat, uniform


@pytest.mark.parametrize(
    "make", [lambda s: uniform(300, 5, seed=s), lambda s: rand100k(0.01, 0.05, seed=s), lambda s: rmat(8, 8, seed=s)]
)
def test_same_seed_same_graph(make):
    a, b, c = make(1), make(1), make(2)
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_uniform_size():
    g = uniform(1000, 7.5, seed=0)
    assert g.num_nodes == 1000 and g.num_edges == 7500


def test_rand100k_degree_shape():
    g = rand100k(vertex_scale=0.02, degree_scale=0.05, seed=0)  # 2000 vertices, degrees 100 and 5
    degrees = g.in_degrees()
    assert g.num_nodes == 2000
    assert int((degrees == 100).sum()) == 400 and int((degrees == 5).sum()) == 1600
    assert g.num_edges == 400 * 100 + 1600 * 5
    assert not torch.equal(g.edge_order("csr"), torch.arange(g.num_edges))  # shuffled user order


def test_rmat_is_skewed():
    g = rmat(12, 16, seed=0)
    degrees = np.sort(g.in_degrees().numpy())[::-1]
    assert g.num_nodes == 4096 and g.num_edges == 4096 * 16
    assert degrees[:41].sum() > 0.1 * g.num_edges  # top 1% of vertices hold over 10% of the edges
    uniform_degrees = np.sort(uniform(4096, 16, seed=0).in_degrees().numpy())[::-1]
    assert degrees[0] > 5 * uniform_degrees[0]


def test_rmat_rejects_bad_probabilities():
    with pytest.raises(ValueError, match="probabilities"):
        rmat(4, a=0.6, b=0.3, c=0.2)
