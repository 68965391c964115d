import numpy as np
import pytest
import torch

from featgraph.datasets import rand100k, rmat, uniform
from featgraph.datasets.synthetic import community


@pytest.mark.parametrize(
    "make",
    [
        lambda s: uniform(300, 5, seed=s),
        lambda s: rand100k(0.01, 0.05, seed=s),
        lambda s: rmat(8, 8, seed=s),
        lambda s: community(300, 5, 16, seed=s),
    ],
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


@pytest.mark.parametrize("within", [0.0, 0.5, 1.0])
def test_community_edges_stay_inside_their_planted_community_at_the_given_rate(within):
    num_nodes, size = 1_000, 50  # the last community (ids 950..999 before the shuffle) as full as the others
    g = community(num_nodes, 20, size, within, seed=3)
    src, dst = g.coo()
    assert g.num_nodes == num_nodes and g.num_edges == 20_000
    # the planted communities are found again as the classes of vertices that share in-neighbours' ranges:
    # undo the shuffle by recomputing it with the generator's draws in the same order
    gen = torch.Generator().manual_seed(3)
    dst0 = torch.randint(0, num_nodes, (20_000,), generator=gen)
    torch.rand(20_000, generator=gen), torch.randint(0, num_nodes, (20_000,), generator=gen)
    torch.rand(20_000, generator=gen)
    relabel = torch.randperm(num_nodes, generator=gen)
    planted = torch.empty(num_nodes, dtype=torch.int64)
    planted[relabel] = torch.arange(num_nodes) // size
    inside = (planted[src] == planted[dst]).double().mean().item()
    chance = size / num_nodes  # a uniform source falls in the community this often
    assert inside == pytest.approx(within + (1 - within) * chance, abs=0.02)
    assert sorted(dst0.bincount(minlength=num_nodes).tolist()) == sorted(g.in_degrees().tolist())


def test_community_refuses_bad_arguments():
    with pytest.raises(ValueError, match="within must be a probability"):
        community(10, 2, 4, within=1.5)
    with pytest.raises(ValueError, match="community_size must be at least 1"):
        community(10, 2, 0)
