"""The compiled draws: exact counts, uniform and weighted distributions (chi-square at fixed seeds, so the
outcomes are fixed), the weight tables, and the relabelling map left as found."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats as stats
import torch

from featgraph import Graph, datasets
from featgraph.sampling import NeighborSampler, kernel
from tests.sampling.reference import drawn_positions, expected_counts, fan_graph

ROWS = 3000  # destinations of the fan graphs: independent draws per test
P_MIN = 1e-3  # a fixed seed gives a fixed p-value; a broken distribution gives ~0


def draw(degree: int, fanout: int, replace: bool = False, weight: list[float] | None = None) -> np.ndarray:
    """Every fan-graph destination's drawn row positions, (ROWS, fanout)."""
    graph = fan_graph(ROWS, degree)
    edge_weight = None if weight is None else torch.tensor(weight, dtype=torch.float64).repeat(ROWS)
    sampler = NeighborSampler(graph, [fanout], replace=replace, weight=edge_weight)
    return drawn_positions(sampler.sample(torch.arange(ROWS), seed=7).blocks[0], ROWS, fanout)


def uniform_subset_pvalue(positions: np.ndarray, degree: int) -> float:
    """Pearson's test that each row is a uniform k-subset, from the per-position counts. A row holds exactly
    k positions, so counts vary less than multinomial ones: cov = p(1-p) d/(d-1) (I - 1/d), p = k/d, and
    the statistic scaled by (d-1) / (d (1-p)) is chi-square with d-1 degrees of freedom."""
    rows, fanout = positions.shape
    p = fanout / degree
    counts = np.bincount(positions.ravel(), minlength=degree)
    pearson = ((counts - rows * p) ** 2 / (rows * p)).sum()
    return float(stats.chi2.sf(pearson * (degree - 1) / (degree * (1 - p)), degree - 1))


@pytest.mark.parametrize(
    "degree, fanout",
    [(6, 2), (10, 2), (7, 6)],
    ids=["selection", "floyd", "one-left-out"],
)
def test_uniform_without_replacement_draws_every_subset_alike(degree, fanout):
    positions = draw(degree, fanout)
    assert (np.diff(positions, axis=1) > 0).all()  # distinct, listed in CSR order
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(degree), fanout))}
    observed = np.bincount([subsets[tuple(row)] for row in positions], minlength=len(subsets))
    assert stats.chisquare(observed).pvalue > P_MIN


@pytest.mark.parametrize("degree, fanout", [(200, 10), (200, 60), (1000, 40)], ids=["floyd", "selection", "floyd-k40"])
def test_high_degree_vertex_neighbours_drawn_uniformly(degree, fanout):
    positions = draw(degree, fanout)
    assert (np.diff(positions, axis=1) > 0).all()
    assert uniform_subset_pvalue(positions, degree) > P_MIN


def test_the_uniform_test_rejects_a_biased_draw():
    positions = draw(200, 10)
    biased = np.where(positions < 100, positions, positions - 100 * (positions % 7 == 0))  # 100..199: fewer
    assert uniform_subset_pvalue(np.sort(biased, axis=1), 200) < P_MIN


def test_with_replacement_draws_uniformly_and_repeats():
    positions = draw(7, 5, replace=True)
    assert (np.diff(np.sort(positions, axis=1), axis=1) == 0).any()
    assert stats.chisquare(np.bincount(positions.ravel(), minlength=7)).pvalue > P_MIN
    # more draws than neighbours
    assert draw(3, 8, replace=True).shape == (ROWS, 8)


WEIGHT = [1.0, 2.0, 0.0, 3.0, 4.0, 5.0]  # position 2 can never be drawn


def test_weighted_with_replacement_follows_the_weights():
    counts = np.bincount(draw(len(WEIGHT), 4, replace=True, weight=WEIGHT).ravel(), minlength=len(WEIGHT))
    assert counts[2] == 0
    positive = np.array([w for w in WEIGHT if w > 0])
    expected = counts.sum() * positive / positive.sum()
    assert stats.chisquare(counts[np.array(WEIGHT) > 0], expected).pvalue > P_MIN


def test_weighted_without_replacement_follows_successive_draws():
    """Two distinct draws, each proportional to the weights left: P({i, j}) = w_i/W w_j/(W-w_i) + the swap."""
    positions = draw(len(WEIGHT), 2, weight=WEIGHT)
    assert (np.diff(positions, axis=1) > 0).all() and not (positions == 2).any()
    total = sum(WEIGHT)
    pairs = list(itertools.combinations([i for i, w in enumerate(WEIGHT) if w > 0], 2))
    exact = np.array(
        [WEIGHT[i] / total * WEIGHT[j] / (total - WEIGHT[i]) + WEIGHT[j] / total * WEIGHT[i] / (total - WEIGHT[j])
         for i, j in pairs]
    )  # fmt: skip
    index = {pair: n for n, pair in enumerate(pairs)}
    observed = np.bincount([index[tuple(row)] for row in positions], minlength=len(pairs))
    assert stats.chisquare(observed, exact * ROWS).pvalue > P_MIN


@pytest.mark.parametrize("fanout", [5, 9, -1])
def test_weighted_keeps_every_positive_edge_when_asked_for_as_many(fanout):
    sampler = NeighborSampler(fan_graph(ROWS, len(WEIGHT)), [fanout], weight=torch.tensor(WEIGHT).repeat(ROWS))
    positions = drawn_positions(sampler.sample(torch.arange(ROWS), seed=1).blocks[0], ROWS, 5)
    assert (positions == np.array([0, 1, 3, 4, 5])).all()


def test_counts_are_min_of_fanout_and_degree_on_a_skewed_graph():
    graph = datasets.rmat(10, 8, seed=3)
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[:300]
    for fanout, replace in [(5, False), (5, True), (-1, False), (-1, True), (1000, False)]:
        block = NeighborSampler(graph, [fanout], replace=replace).sample(seeds, seed=0).blocks[0]
        counts = torch.bincount(block.graph.coo()[1], minlength=seeds.numel())
        assert torch.equal(counts, expected_counts(graph.in_degrees()[seeds], fanout, replace))


def test_weight_tables_hold_positive_counts_and_running_sums_per_row():
    graph = datasets.uniform(200, 6, seed=1)
    indptr = graph.csr().indptr
    weight = torch.rand(graph.num_edges, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    weight[::3] = 0
    tables = kernel.weight_tables(indptr, weight, replace=True, threads=2)
    rows = torch.repeat_interleave(torch.arange(200), indptr.diff())
    positive = torch.bincount(rows, weights=(weight > 0).double(), minlength=200).long()
    assert torch.equal(tables.positive_degree, positive)
    per_row = [weight[lo:hi].cumsum(0) for lo, hi in zip(indptr[:-1].tolist(), indptr[1:].tolist(), strict=True)]
    torch.testing.assert_close(tables.cumulative, torch.cat(per_row))
    assert kernel.weight_tables(indptr, weight, replace=False, threads=1).cumulative is None


def test_relabelling_map_is_left_unclaimed():
    graph = datasets.rmat(9, 8, seed=0)
    sampler = NeighborSampler(graph, [10, 10, -1], num_threads=2)
    sampler.sample(torch.arange(0, 512, 5), seed=3)
    assert bool((sampler._local == kernel.UNCLAIMED).all())


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_typed_hop_keeps_claimed_sources_and_numbers_new_ones_from_base(threads):
    """One relation of a typed batch (sources of one type, destinations of another): sources already in the
    batch keep their ids, the others get base, base + 1, ... in order of first appearance and stay claimed;
    every edge is an edge of the relation, its destination the batch id of the frontier vertex it was drawn for
    (the frontier's ids start at 10 here)."""
    gen = torch.Generator().manual_seed(4)
    src, dst = torch.randint(0, 40, (600,), generator=gen), torch.randint(0, 25, (600,), generator=gen)
    relation = Graph(src, dst, (40, 25))
    local = torch.full((40,), kernel.UNCLAIMED, dtype=torch.int64)
    local[[7, 3, 12]] = torch.tensor([0, 1, 2])  # already in the batch
    frontier = torch.tensor([5, 0, 24, 9])
    hop = kernel.sample_typed_hop(relation.csr(), frontier, 6, False, None, local, 3, 10, 11, 2, threads)
    sources, destinations = hop.edge_index
    degree = torch.bincount(dst, minlength=25)[frontier]
    assert torch.equal(torch.bincount(destinations - 10, minlength=4), degree.clamp(max=6))
    assert torch.equal(src[hop.edge_ids], torch.cat([torch.tensor([7, 3, 12]), hop.new_nodes])[sources])
    assert torch.equal(dst[hop.edge_ids], frontier[destinations - 10])
    outside = src[hop.edge_ids][~torch.isin(src[hop.edge_ids], torch.tensor([7, 3, 12]))]
    first = [u for i, u in enumerate(outside.tolist()) if u not in outside[:i].tolist()]
    assert hop.new_nodes.tolist() == first  # order of first appearance
    assert torch.equal(local[hop.new_nodes], torch.arange(3, 3 + len(first)))
    claimed = (local != kernel.UNCLAIMED).nonzero().flatten()
    assert set(claimed.tolist()) == {7, 3, 12, *first}
    again = kernel.sample_typed_hop(relation.csr(), frontier, 6, False, None, local.clone(), 3, 10, 11, 2, 1)
    assert torch.equal(again.edge_ids, hop.edge_ids)  # the thread count changes nothing


def test_draws_do_not_depend_on_the_thread_count():
    graph = fan_graph(500, 50)
    weight = torch.rand(graph.num_edges, generator=torch.Generator().manual_seed(0))
    for replace, edge_weight in itertools.product([False, True], [None, weight]):
        blocks = [
            NeighborSampler(graph, [7], replace=replace, weight=edge_weight, num_threads=t)
            .sample(torch.arange(500), seed=11)
            .blocks[0]
            for t in (1, 2, 3)
        ]
        assert all(torch.equal(b.e_id, blocks[0].e_id) and torch.equal(b.n_id, blocks[0].n_id) for b in blocks)


def test_empty_rows_draw_nothing():
    graph = Graph(torch.tensor([1, 2]), torch.tensor([0, 0]), 4)  # 1, 2, 3 have no in-edges
    for replace, weight in [(False, None), (True, None), (True, [1.0, 1.0]), (False, [0.0, 0.0])]:
        block = NeighborSampler(graph, [3], replace=replace, weight=weight).sample([3, 1], seed=0).blocks[0]
        assert block.graph.num_edges == 0 and torch.equal(block.n_id, torch.tensor([3, 1]))
