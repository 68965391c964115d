import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.graph.hilbert import hilbert_edge_order, hilbert_index, hilbert_keys
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


@settings(max_examples=60, deadline=None)
@given(
    order=st.integers(1, 31),
    num_edges=st.integers(0, 40_000),
    dtype=st.sampled_from([torch.int64, torch.int32]),
    strided=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_compiled_keys_are_the_vectorised_walks(order, num_edges, dtype, strided, seed):
    """The CPU's compiled keys against ``hilbert_index`` (the whole-array walk), on ids anywhere in the grid,
    int32 or int64, contiguous or strided (a view's every other edge); the inputs are left as they were."""
    gen = torch.Generator().manual_seed(seed)
    high = min(1 << order, 2**31 - 1) if dtype == torch.int32 else 1 << order
    ends = torch.randint(0, high, (2, num_edges * (2 if strided else 1)), generator=gen).to(dtype)
    src, dst = (ends[:, ::2] if strided else ends).unbind(0)
    before = ends.clone()
    keys = hilbert_keys(src, dst, order)
    assert torch.equal(keys, hilbert_index(src, dst, order))
    assert torch.equal(ends, before)


def test_hilbert_edge_order_keeps_duplicate_edges_in_id_order():
    src = torch.tensor([3, 1, 3, 0, 1, 3])
    dst = torch.tensor([2, 0, 2, 0, 0, 2])
    order = hilbert_edge_order(src, dst, 4)
    keys = hilbert_index(src, dst, 2)
    expected = sorted(range(6), key=lambda e: (int(keys[e]), e))
    assert order.tolist() == expected
