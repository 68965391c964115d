import numpy as np
import pytest
import torch

from featgraph.graph.formats import INT32_LIMIT, _vectorised_with_loops, compress, index_dtype_for, with_loops


def test_compress_groups_stably_against_numpy():
    gen = np.random.default_rng(0)
    group = gen.integers(0, 9, 200)
    other = gen.integers(0, 50, 200)
    out = compress(torch.from_numpy(group), torch.from_numpy(other), num_groups=12)
    order = np.argsort(group, kind="stable")
    assert np.array_equal(out.edge_ids.numpy(), order)
    assert np.array_equal(out.indices.numpy(), other[order])
    assert np.array_equal(out.indptr.numpy(), np.searchsorted(group[order], np.arange(13)))


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
