import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.graph.formats import compress
from featgraph.graph.partition import _pointers, partition_sources
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
    pointers, indices, edge_ids = (t.long() for t in parts.csr)
    assert parts.boundaries[0] == 0 and parts.boundaries[-1] == n and pointers.numel() == n * num_parts + 1
    for k in range(num_parts):
        lo, hi = parts.segment_of(k)
        runs = [torch.arange(int(pointers[v * num_parts + k]), int(pointers[v * num_parts + k + 1])) for v in range(n)]
        rows = np.repeat(np.arange(n), [run.numel() for run in runs])
        seg_src = indices[torch.cat(runs)]
        assert torch.all((seg_src >= lo) & (seg_src < hi))
        rebuilt = adjacency(seg_src, torch.from_numpy(rows), n)
        in_segment = (np.arange(n) >= lo) & (np.arange(n) < hi)
        expected = ref @ sp.diags(in_segment.astype(float))
        expected.eliminate_zeros()
        assert (rebuilt != expected).nnz == 0
    assert torch.equal(src[edge_ids], indices) and torch.equal(pointers[::num_parts], g.csr().indptr)
    assert sorted(edge_ids.tolist()) == list(range(g.num_edges))
    assert g.source_partitions(num_parts, index_dtype) is parts  # cached


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    m=st.integers(0, 300),
    num_parts=st.integers(1, 9),
    seed=st.integers(0, 2**16),
    narrow=st.booleans(),
)
def test_property_partitions_are_pointers_into_the_graphs_source_ascending_csr(n, m, num_parts, seed, narrow):
    """Against a reference sort by (destination, source, edge id) with numpy: the kernels' CSR lists each row's
    sources in ascending order (duplicates in id order), and every segment count's partitions point into those
    very arrays (no copy of the edges); a CSR in the user's order (int64, as samplers read it) is copied once,
    sorted, and left as it was; max and min get runs in edge id order (a copy where the CSR is not so)."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (m,), generator=gen), torch.randint(0, n, (m,), generator=gen)
    g = Graph(src, dst, n)
    dtype = torch.int32 if narrow else torch.int64
    user_order = None if narrow else g.csr()
    csr = g.csr(torch.int32) if narrow else None
    parts = g.source_partitions(num_parts, dtype)
    order = np.lexsort((np.arange(m), src.numpy(), dst.numpy()))
    assert parts.csr.edge_ids.tolist() == order.tolist() and parts.csr.indices.tolist() == src.numpy()[order].tolist()
    if narrow:
        assert [t.data_ptr() for t in csr[1:]] == [t.data_ptr() for t in parts.csr[1:]]
        assert csr.edge_ids.tolist() == order.tolist()
    else:  # the user-ordered CSR is not the partitions' (rows in edge id order) and stays so
        assert user_order.edge_ids.tolist() == np.argsort(dst.numpy(), kind="stable").tolist()
    if narrow:  # the torch path (devices without the compiled search) gives the same pointers
        assert torch.equal(_pointers(csr, parts.boundaries), parts.csr.indptr)
    by_id = g.source_partitions(num_parts, dtype, in_id_order=True)  # max and min: runs in edge id order
    assert by_id.csr.indptr.numel() == n * num_parts + 1 and torch.equal(by_id.boundaries, parts.boundaries)
    in_order = g.csr(dtype, in_id_order=True)
    assert in_order.edge_ids.tolist() == np.argsort(dst.numpy(), kind="stable").tolist()
    if not narrow:  # the int64 CSR keeps id order: served as it is
        assert in_order.edge_ids.data_ptr() == user_order.edge_ids.data_ptr()
    for layout, ascending in ((parts, True), (by_id, False)):
        pointers = layout.csr.indptr.long()
        for v in range(n):
            for k in range(num_parts):
                lo, hi = parts.segment_of(k)
                at = slice(int(pointers[v * num_parts + k]), int(pointers[v * num_parts + k + 1]))
                ids = np.nonzero((dst.numpy() == v) & (src.numpy() >= lo) & (src.numpy() < hi))[0]
                if ascending:
                    ids = ids[np.argsort(src.numpy()[ids], kind="stable")]
                assert layout.csr.edge_ids[at].tolist() == ids.tolist()
                assert layout.csr.indices[at].tolist() == src.numpy()[ids].tolist()


def test_partitions_of_a_csr_not_listing_sources_in_order_are_refused():
    csr = compress(torch.tensor([0, 0]), torch.tensor([3, 1]), 1)  # row 0 lists source 3, then 1
    with pytest.raises(ValueError, match="csr must list each row's sources in ascending order"):
        partition_sources(csr, 4, 2)
    with pytest.raises(ValueError, match="num_parts must be >= 1"):
        partition_sources(compress(torch.tensor([0]), torch.tensor([1]), 1, sort_other=True), 4, 0)


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
