"""A property search over the sampler's inputs: random multigraphs (self loops, duplicate edges, isolated
vertices), fan-outs (-1, 0, small, past the degree), draws with and without replacement, weights that are
zero, subnormal, ordinary or near the float64 maximum, and seeds; every batch is checked against the
independent reference of ``reference.check_minibatch`` and, weighted, draws only positive edges."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.sampling import NeighborSampler
from tests.sampling.reference import check_minibatch

WEIGHTS = st.sampled_from([0.0, 5e-324, 1e-310, 1e-300, 0.5, 1.0, 3.0, 1e300, 1.7e308])


@st.composite
def sampling_cases(draw):
    n = draw(st.integers(1, 25))
    e = draw(st.integers(0, 90))
    src = draw(st.lists(st.integers(0, n - 1), min_size=e, max_size=e))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=e, max_size=e))
    fanouts = draw(st.lists(st.sampled_from([-1, 0, 1, 2, 3, 7]), min_size=1, max_size=3))
    replace = draw(st.booleans())
    weight = draw(st.none() | st.lists(WEIGHTS, min_size=e, max_size=e))
    seeds = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    return n, src, dst, fanouts, replace, weight, seeds, draw(st.integers(0, 2**63 - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sampling_cases())
def test_sampled_batches_match_the_reference(case):
    n, src, dst, fanouts, replace, weight, seeds, seed = case
    graph = Graph(torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64), n)
    weight = None if weight is None else torch.tensor(weight, dtype=torch.float64)
    batch = NeighborSampler(graph, fanouts, replace=replace, weight=weight).sample(torch.tensor(seeds), seed=seed)
    available = None
    if weight is not None:  # only edges of positive weight are ever drawn
        available = torch.bincount(graph.coo()[1], weights=(weight > 0).double(), minlength=n).long()
        assert all(bool((weight[block.e_id] > 0).all()) for block in batch.blocks)
    check_minibatch(graph, batch, torch.tensor(seeds), fanouts, replace, available)
