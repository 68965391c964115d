import numpy as np
import torch

from featgraph.graph.formats import INT32_LIMIT, compress, index_dtype_for


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
