import numpy as np
import pytest
import scipy.sparse as sp
import torch

from featgraph import Graph
from tests.conftest import adjacency, random_edges


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("num_parts", [1, 3, 8])
def test_partitions_rebuild_column_slices_of_the_adjacency(num_parts, index_dtype):
    n = 50
    src, dst = random_edges(n, 400, seed=5)
    g = Graph(src, dst, n)
    parts = g.source_partitions(num_parts, index_dtype)
    assert all(t.dtype == index_dtype for t in parts.csr)
    ref = adjacency(src, dst, n)
    indptr, indices, edge_ids = (t.long() for t in parts.csr)
    assert parts.boundaries[0] == 0 and parts.boundaries[-1] == n
    for k in range(num_parts):
        lo, hi = parts.segment_of(k)
        offsets = indptr[k * n : (k + 1) * n + 1]
        rows = np.repeat(np.arange(n), np.diff(offsets.numpy()))
        seg_src = indices[offsets[0] : offsets[-1]]
        assert torch.all((seg_src >= lo) & (seg_src < hi))
        rebuilt = adjacency(seg_src, torch.from_numpy(rows), n)
        in_segment = (np.arange(n) >= lo) & (np.arange(n) < hi)
        expected = ref @ sp.diags(in_segment.astype(float))
        expected.eliminate_zeros()
        assert (rebuilt != expected).nnz == 0
    assert torch.equal(src[edge_ids], indices)
    assert sorted(edge_ids.tolist()) == list(range(g.num_edges))
    assert g.source_partitions(num_parts, index_dtype) is parts  # cached


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError, match="num_parts must be >= 1"):
        Graph.from_edge_index(torch.tensor([[0], [1]])).source_partitions(0)


def test_hub_partition_takes_the_highest_out_degrees_first():
    g = Graph(torch.tensor([3, 3, 3, 1, 1, 0, 2, 2, 2]), torch.zeros(9, dtype=torch.int64), 5)
    hubs = g.hubs(2, 2)
    assert hubs.ids.tolist() == [2, 3]  # out-degree 3 each, ties by id; vertex 1 (degree 2) left out
    assert hubs.slot.tolist() == [-1, -1, 0, 1, -1] and hubs.num_hubs == 2
    roomy = g.hubs(2, 4)
    assert roomy.ids.tolist() == [2, 3, 1, -1] and roomy.num_hubs == 3
    assert g.hubs(10, 4).num_hubs == 0 and bool((g.hubs(10, 4).slot == -1).all())
    with pytest.raises(ValueError, match="threshold and capacity"):
        g.hubs(0, 4)
