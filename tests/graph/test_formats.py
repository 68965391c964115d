import numpy as np
import pytest
import torch

from featgraph.graph.formats import (
    INT32_LIMIT,
    _sorted_compress,
    _vectorised_with_loops,
    compress,
    index_dtype_for,
    with_loops,
)


@pytest.mark.parametrize(
    "num_edges, num_groups, threads",
    [(200, 12, 1), (0, 7, 2), (0, 0, 1), (30, 3000, 2), (50000, 900, 3), (70000, 5, 4), (70000, 1, 2)],
)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("sort_other", [False, True])
def test_compress_groups_stably_against_numpy(num_edges, num_groups, threads, index_dtype, sort_other):
    """Against numpy's stable argsort (with ``sort_other``, numpy's lexsort by group, other endpoint, id):
    empty groups, duplicate edges, no edges, more groups than edges, and enough edges for several threads,
    whose runs of edge ids must leave each group in id order (hubs: 5 groups over 70,000 edges); the index
    arrays come in ``index_dtype``; torch's sorts (the path off the CPU) give the same."""
    gen = np.random.default_rng(num_edges + num_groups)
    group = gen.integers(0, max(num_groups, 1), num_edges)
    other = gen.integers(0, 50, num_edges)
    ends = torch.from_numpy(group), torch.from_numpy(other)
    order = np.lexsort((np.arange(num_edges), other, group)) if sort_other else np.argsort(group, kind="stable")
    for out in (
        compress(*ends, num_groups, index_dtype, threads, sort_other),
        _sorted_compress(*ends, num_groups, index_dtype, sort_other),
    ):
        assert all(part.dtype == index_dtype for part in out)
        assert np.array_equal(out.edge_ids.numpy(), order)
        assert np.array_equal(out.indices.numpy(), other[order])
        assert np.array_equal(out.indptr.numpy(), np.searchsorted(group[order], np.arange(num_groups + 1)))


def test_index_dtype_switches_at_int32_limit():
    assert index_dtype_for(10, INT32_LIMIT) == torch.int32
    assert index_dtype_for(10, INT32_LIMIT + 1) == torch.int64
    assert index_dtype_for(INT32_LIMIT + 1, 0) == torch.int64


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("with_existing_loops", [False, True])
@pytest.mark.parametrize("sizes", [(12, 12), (12, 7), (5, 9), (0, 0), (6, 0)])
@pytest.mark.parametrize("implementation", [with_loops, _vectorised_with_loops], ids=["cpu", "torch (off the cpu)"])
def test_with_loops_matches_compressing_the_looped_edges(dtype, with_existing_loops, sizes, implementation):
    gen = np.random.default_rng(1)
    num_src, num_dst = sizes
    num_edges = 80 if num_src and num_dst else 0
    src = torch.from_numpy(gen.integers(0, max(num_src, 1), num_edges))
    dst = torch.from_numpy(gen.integers(0, max(num_dst, 1), num_edges))
    if with_existing_loops and num_edges:
        src[:10] = dst[:10] % num_src
    keep = src != dst
    num_loops = min(num_src, num_dst)
    loops = torch.arange(num_loops)
    looped_src, looped_dst = torch.cat([src[keep], loops]), torch.cat([dst[keep], loops])
    mask = None if bool(keep.all()) else keep
    for group, other, looped_group, looped_other, count in (
        (dst, src, looped_dst, looped_src, num_dst),
        (src, dst, looped_src, looped_dst, num_src),
    ):
        got = implementation(compress(group, other, count).to(dtype), mask, num_loops)
        expected = compress(looped_group, looped_other, count).to(dtype)
        for mine, theirs in zip(got, expected, strict=True):
            assert mine.dtype == dtype and torch.equal(mine, theirs)
