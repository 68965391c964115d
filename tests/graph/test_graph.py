from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph, ops
from tests.conftest import adjacency, random_edges


def row_offsets(matrix) -> np.ndarray:
    """CSR offsets with duplicate edges counted (scipy merges them into one entry of value 2)."""
    return np.concatenate([[0], np.cumsum(np.asarray(matrix.sum(1)).ravel())]).astype(np.int64)


def test_csr_matches_scipy(graph_case):
    g, src, dst = graph_case
    ref = adjacency(src, dst, g.num_nodes)
    indptr, indices, edge_ids = g.csr()
    assert np.array_equal(indptr.numpy(), row_offsets(ref))
    # within each row, sources as a multiset equal scipy's column multiset
    ours = g.csr()
    rows = np.repeat(np.arange(g.num_nodes), np.diff(indptr.numpy()))
    rebuilt = adjacency(indices, torch.from_numpy(rows), g.num_nodes)
    assert (rebuilt != ref).nnz == 0
    # edge ids point back to the user's edges
    assert torch.equal(src[ours.edge_ids], indices)
    assert torch.equal(dst[ours.edge_ids], torch.from_numpy(rows))
    assert sorted(edge_ids.tolist()) == list(range(g.num_edges))


def test_csc_matches_scipy(graph_case):
    g, src, dst = graph_case
    ref = adjacency(src, dst, g.num_nodes)
    indptr, indices, edge_ids = g.csc()
    assert np.array_equal(indptr.numpy(), row_offsets(ref.T))
    assert torch.equal(dst[edge_ids], indices)
    cols = np.repeat(np.arange(g.num_nodes), np.diff(indptr.numpy()))
    assert np.array_equal(src[edge_ids].numpy(), cols)


def test_degrees_match_scipy(graph_case):
    g, src, dst = graph_case
    ref = adjacency(src, dst, g.num_nodes)
    assert np.array_equal(g.in_degrees().numpy(), np.asarray(ref.sum(1)).ravel())
    assert np.array_equal(g.out_degrees().numpy(), np.asarray(ref.sum(0)).ravel())


def test_int32_views_for_kernels(graph_case):
    """The kernels' int32 CSR holds the int64 one's rows, each listing its sources in ascending order (ties in
    edge id order), where the int64 one keeps edge id order."""
    g, src, dst = graph_case
    assert g.index_dtype == torch.int32
    small = g.csr(torch.int32)
    assert all(t.dtype == torch.int32 for t in small)
    full = g.csr()
    assert torch.equal(small.indptr.long(), full.indptr)
    assert full.edge_ids.tolist() == np.argsort(dst.numpy(), kind="stable").tolist()
    assert small.edge_ids.tolist() == np.lexsort((np.arange(g.num_edges), src.numpy(), dst.numpy())).tolist()
    assert torch.equal(small.indices.long(), src[small.edge_ids.long()])
    assert g.csr(torch.int32) is small  # cached


def test_edge_value_permutations_round_trip(graph_case):
    g, src, _ = graph_case
    values = torch.arange(g.num_edges, dtype=torch.float64).unsqueeze(1).repeat(1, 3)
    for order in ("csr", "csc", "hilbert"):
        there = g.permute_edge_values(values, "user", order)
        assert torch.equal(there[:, 0].long(), g.edge_order(order).long())
        assert torch.equal(g.permute_edge_values(there, order, "user"), values)
    via = g.permute_edge_values(g.permute_edge_values(values, "user", "csr"), "csr", "csc")
    assert torch.equal(via, g.permute_edge_values(values, "user", "csc"))
    with pytest.raises(ValueError, match="unknown edge order"):
        g.edge_order("random")


def test_degree_order(graph_case):
    g, _, _ = graph_case
    order = g.degree_order("in")
    degrees = g.in_degrees()[order]
    assert torch.all(degrees[:-1] >= degrees[1:])
    assert sorted(order.tolist()) == list(range(g.num_nodes))
    ascending = g.out_degrees()[g.degree_order("out", descending=False)]
    assert torch.all(ascending[:-1] <= ascending[1:])


def test_reverse_swaps_formats(graph_case):
    g, _, _ = graph_case
    r = g.reverse()
    assert all(torch.equal(a, b) for a, b in zip(r.csr(), g.csc(), strict=True))


def test_with_self_loops_matches_pyg_utils():
    utils = pytest.importorskip("torch_geometric.utils")
    src, dst = random_edges(30, 100, seed=2)
    src[:5] = dst[:5]  # some self loops to remove, some vertices without one
    weight = torch.rand(100)
    g = Graph(src, dst, num_nodes=30, edge_weight=weight)
    expected, expected_weight = utils.add_self_loops(
        *utils.remove_self_loops(torch.stack([src, dst]), weight), fill_value=2.0, num_nodes=30
    )
    looped = g.with_self_loops(fill_weight=2.0)
    assert torch.equal(torch.stack(looped.coo()), expected)
    assert torch.equal(looped.edge_weight, expected_weight)
    assert g.with_self_loops(fill_weight=2.0) is looped  # cached
    assert g.num_edges == 100 and Graph(src, dst, num_nodes=30).with_self_loops().edge_weight is None


def test_caller_tensors_never_modified_or_aliased():
    src, dst = random_edges(30, 100, seed=1)
    src_before, dst_before = src.clone(), dst.clone()
    edge_index = torch.stack([src, dst])
    g = Graph.from_edge_index(edge_index, num_nodes=30)
    g.csr(), g.csc(), g.tc_translation(), g.source_partitions(3), g.edge_order("hilbert")
    assert torch.equal(src, src_before) and torch.equal(dst, dst_before)
    edge_index[0, 0] = 29  # later changes by the caller do not reach the graph
    assert int(g.coo()[0][0]) == int(src_before[0])


def test_non_contiguous_and_int32_input():
    src, dst = random_edges(20, 50, seed=2)
    edge_index = torch.stack([src, dst]).t().contiguous().t().to(torch.int32)  # strided view, int32
    assert not edge_index[0].is_contiguous()
    g = Graph.from_edge_index(edge_index, num_nodes=20)
    assert g.coo()[0].dtype == torch.int64 and g.coo()[0].is_contiguous()
    assert torch.equal(g.coo()[0], src)


def test_num_nodes_inferred_and_isolated_tail():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]))
    assert g.num_nodes == 3
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=10)
    assert g.in_degrees()[3:].sum() == 0 and g.in_degrees().numel() == 10


def test_empty_graph():
    g = Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.int64), num_nodes=5)
    assert g.num_edges == 0 and g.num_nodes == 5
    assert torch.equal(g.csr().indptr, torch.zeros(6, dtype=torch.int64))
    assert g.tc_translation().num_blocks == 0


@pytest.mark.parametrize(
    ("edge_index", "num_nodes", "error", "message"),
    [
        (torch.tensor([[0, -1], [1, 2]]), None, ValueError, "negative node id -1"),
        (torch.tensor([[0, 5], [1, 2]]), 4, ValueError, "node id 5 out of range for num_nodes=4"),
        (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), None, TypeError, "integer node ids"),
        (torch.tensor([[True], [False]]), None, TypeError, "integer node ids"),
        (torch.tensor([0, 1, 2]), None, ValueError, r"shape \(2, E\)"),
        (torch.zeros(3, 4, dtype=torch.int64), None, ValueError, r"shape \(2, E\)"),
        (torch.tensor([[0], [1]]), -1, ValueError, "num_nodes must be a non-negative int"),
        (torch.tensor([[0], [1]]), 2.5, ValueError, "num_nodes must be a non-negative int"),
    ],
)
def test_bad_edge_index(edge_index, num_nodes, error, message):
    with pytest.raises(error, match=message):
        Graph.from_edge_index(edge_index, num_nodes=num_nodes)


@pytest.mark.parametrize(
    ("weight", "error", "message"),
    [
        (torch.tensor([1.0, float("nan")]), ValueError, "non-finite"),
        (torch.tensor([1.0, float("inf")]), ValueError, "non-finite"),
        (torch.tensor([1, 2]), TypeError, "floating"),
        (torch.tensor([1.0, 2.0, 3.0]), ValueError, r"shape \(2,\)"),
    ],
)
def test_bad_edge_weight(weight, error, message):
    with pytest.raises(error, match=message):
        Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), edge_weight=weight)


def test_edge_weight_is_copied():
    weight = torch.tensor([0.5, 2.0])
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), edge_weight=weight)
    weight[0] = 9.0
    assert float(g.edge_weight[0]) == 0.5


def test_fingerprint_depends_on_structure_only():
    src, dst = random_edges(50, 300, seed=3)
    a = Graph(src, dst, 50)
    assert a.fingerprint == Graph(src.clone(), dst.clone(), 50).fingerprint
    assert len(a.fingerprint) == 32
    assert a.fingerprint != Graph(src, dst, 51).fingerprint
    assert a.fingerprint != Graph(dst, src, 50).fingerprint


def test_adjacency_is_torch_sparse_and_matches_scipy(graph_case):
    g, src, dst = graph_case
    values = torch.rand(g.num_edges, dtype=torch.float64)
    dense = g.adjacency(values).to_dense()
    assert torch.allclose(dense, torch.from_numpy(adjacency(src, dst, g.num_nodes, values.numpy()).toarray()))
    assert torch.equal(g.adjacency().to_dense(), torch.from_numpy(adjacency(src, dst, g.num_nodes).toarray()).float())


def test_adjacency_lies_on_the_graphs_device(gpu):
    """cuSPARSE baselines build the matrix of a graph on the GPU: every part of it on the graph's device."""
    src, dst = random_edges(40, 200, seed=2)
    matrix = Graph(src.to(gpu), dst.to(gpu), 40).adjacency()
    assert matrix.device == gpu and matrix.values().device == gpu
    assert torch.equal(matrix.to_dense().cpu(), torch.from_numpy(adjacency(src, dst, 40).toarray()).float())


def _resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    pytest.skip("no /proc/self/status")


def _heap_temporaries() -> bytearray:
    chunks = [bytearray(64 * 1024) for _ in range(1600)]  # 100 MB of small blocks on the C heap
    keep = bytearray(64 * 1024)  # allocated last, it pins the top of the heap
    del chunks
    return keep


def test_cached_builds_hand_their_freed_temporaries_back(monkeypatch):
    from featgraph.graph import graph as graph_module

    if graph_module._malloc_trim() is None:
        pytest.skip("not glibc")
    monkeypatch.setattr(graph_module, "TRIM_MIN_EDGES", 1)  # this graph counts as large
    graph_module.release_freed_heap()  # no free pages left by earlier tests for the temporaries to reuse
    before = _resident_mb()
    kept = [_heap_temporaries()]  # outside the cache: glibc keeps the freed 100 MB mapped
    assert _resident_mb() - before > 80
    g = Graph(torch.tensor([0]), torch.tensor([1]), 2)
    g.cached(("temporaries",), _heap_temporaries)  # inside: freed pages go back, the old ones too
    assert _resident_mb() - before < 40
    assert len(kept) == 1


def test_builds_for_graphs_below_the_trim_size_skip_the_trim(monkeypatch):
    from featgraph.graph import graph as graph_module

    trims = []
    monkeypatch.setattr(graph_module, "release_freed_heap", lambda: trims.append(1))
    small = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    small.cached(("anything",), lambda: 1)
    assert trims == [] and small.num_edges < graph_module.TRIM_MIN_EDGES
    monkeypatch.setattr(graph_module, "TRIM_MIN_EDGES", 2)
    small.cached(("another",), lambda: 2)
    assert trims == [1]


def bipartite_edges(num_src: int, num_dst: int, num_edges: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    return src, torch.randint(0, num_dst, (num_edges,), generator=gen)


@pytest.mark.parametrize(("num_src", "num_dst"), [(11, 4), (3, 9), (6, 0), (0, 5)])
def test_bipartite_formats_match_scipy(num_src, num_dst):
    num_edges = 40 if num_src and num_dst else 0
    src, dst = bipartite_edges(max(num_src, 1), max(num_dst, 1), num_edges, seed=num_src * 10 + num_dst)
    g = Graph.from_edge_index(torch.stack([src, dst]), size=(num_src, num_dst))
    assert (g.num_src_nodes, g.num_dst_nodes, g.is_bipartite) == (num_src, num_dst, True)
    ref = sp.coo_matrix((np.ones(num_edges), (dst.numpy(), src.numpy())), shape=(num_dst, num_src)).tocsr()
    indptr, indices, edge_ids = g.csr()
    assert np.array_equal(indptr.numpy(), row_offsets(ref)) and torch.equal(src[edge_ids], indices)
    csc = g.csc()
    assert csc.indptr.numel() == num_src + 1 and torch.equal(dst[csc.edge_ids], csc.indices)
    assert torch.equal(g.in_degrees(), torch.from_numpy(np.asarray(ref.sum(1)).ravel()).long())
    assert torch.equal(g.out_degrees(), torch.from_numpy(np.asarray(ref.sum(0)).ravel()).long())
    x = torch.randn(num_src, 3, dtype=torch.float64)
    torch.testing.assert_close(g.adjacency().to(torch.float64) @ x, torch.from_numpy(ref @ x.numpy()))
    back = g.reverse()
    assert (back.num_src_nodes, back.num_dst_nodes) == (num_dst, num_src)
    parts = g.source_partitions(3)
    assert parts.csr.indptr.numel() == 3 * num_dst + 1 and int(parts.boundaries[-1]) == num_src
    with pytest.raises(ValueError, match="bipartite .* use num_src_nodes / num_dst_nodes"):
        _ = g.num_nodes
    assert "num_nodes=(" in repr(g) and g.fingerprint != Graph(src, dst, max(num_src, num_dst) or 1).fingerprint


def test_bipartite_self_loops_join_each_destination_to_the_source_of_its_id():
    src, dst = torch.tensor([4, 1, 2, 0]), torch.tensor([1, 1, 2, 0])
    looped = Graph(src, dst, (5, 3)).with_self_loops()
    got_src, got_dst = looped.coo()
    assert got_src.tolist() == [4, 0, 1, 2] and got_dst.tolist() == [1, 0, 1, 2]  # loops replaced, then appended
    assert (looped.num_src_nodes, looped.num_dst_nodes) == (5, 3)


def test_from_csr_keeps_the_given_csr_and_its_order():
    indptr, indices = torch.tensor([0, 2, 2, 5]), torch.tensor([4, 0, 1, 1, 6])
    g = Graph.from_csr(indptr, indices, num_src=7)
    assert (g.num_src_nodes, g.num_dst_nodes, g.num_edges) == (7, 3, 5)
    csr = g.csr()
    assert csr.indptr is g.csr().indptr and torch.equal(csr.indptr, indptr) and torch.equal(csr.indices, indices)
    assert torch.equal(csr.edge_ids, torch.arange(5))
    src, dst = g.coo()
    assert torch.equal(src, indices) and dst.tolist() == [0, 0, 2, 2, 2]
    assert torch.equal(g.csr(torch.int32).indptr, indptr.int())
    trusted = Graph.from_csr(indptr, indices, num_src=7, check=False)
    assert torch.equal(torch.stack(trusted.coo()), torch.stack(g.coo())) and trusted.csr().indptr is indptr


def test_from_csr_builds_its_csc_on_first_use_and_the_reverse_graph_shares_it():
    """The CSC of a graph made from a CSR (as the sampler makes blocks) groups its edges by source as numpy's
    stable argsort does; it is the reverse graph's CSR; degrees and a reversed aggregation agree with a graph
    built from the same edges as COO. A trusted ``edge_index`` needs ``check=False``."""
    indptr, indices = torch.tensor([0, 2, 2, 5]), torch.tensor([4, 0, 1, 1, 6])
    edge_index = torch.stack([indices, torch.tensor([0, 0, 2, 2, 2])])
    g = Graph.from_csr(indptr, indices, num_src=7, check=False, edge_index=edge_index)
    reference = Graph(edge_index[0], edge_index[1], (7, 3))
    order = np.argsort(indices.numpy(), kind="stable")
    for dtype in (torch.int32, torch.int64):
        csc = g.csc(dtype)
        assert all(part.dtype == dtype for part in csc)
        assert csc.edge_ids.tolist() == order.tolist() and csc.indices.tolist() == edge_index[1, order].tolist()
    assert g.reverse().csr() is g.csc() and g.reverse().csc() is g.csr()
    assert torch.equal(g.in_degrees(), torch.bincount(edge_index[1], minlength=3))
    assert torch.equal(g.out_degrees(), torch.bincount(indices, minlength=7))
    assert torch.equal(g.reverse().in_degrees(), g.out_degrees())
    x = torch.randn(3, 4, dtype=torch.float64)
    expected = ops.gspmm(reference.reverse(), "copy_lhs", "sum", x, None)
    torch.testing.assert_close(ops.gspmm(g.reverse(), "copy_lhs", "sum", x, None), expected)
    with pytest.raises(ValueError, match="check=False"):
        Graph.from_csr(indptr, indices, num_src=7, edge_index=edge_index)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Graph(torch.tensor([5]), torch.tensor([0]), (5, 3)), "source id 5 out of range"),
        (lambda: Graph(torch.tensor([0]), torch.tensor([3]), (5, 3)), "destination id 3 out of range"),
        (lambda: Graph(torch.tensor([0]), torch.tensor([0]), (5, -1)), "pair"),
        (lambda: Graph(torch.tensor([0]), torch.tensor([0]), (5, 3, 1)), "pair"),
        (lambda: Graph.from_edge_index(torch.zeros(2, 1, dtype=torch.long), 2, size=(2, 2)), "num_nodes or size"),
        (lambda: Graph.from_csr(torch.tensor([1, 2]), torch.tensor([0]), 3), "rise from 0"),
        (lambda: Graph.from_csr(torch.tensor([0, 2, 1]), torch.tensor([0]), 3), "rise from 0"),
        (lambda: Graph.from_csr(torch.tensor([0, 1]), torch.tensor([3]), 3), "source id 3 out of range"),
    ],
)
def test_bad_bipartite_input(build, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build()


@pytest.mark.parametrize("sizes", [(30, 30), (30, 12)])
def test_with_self_loops_carries_built_formats_over_as_a_fresh_build_would_make_them(sizes):
    src, dst = random_edges(max(sizes), 100, seed=3)
    src, dst = src % sizes[0], dst % sizes[1]
    src[:5] = dst[:5]
    g = Graph(src, dst, sizes)
    sampled = Graph(src, dst, sizes)  # a CSC in edge id order within rows, as a sampler gives one
    sampled._cache[("csc", torch.int32)] = sampled.csc().to(torch.int32)
    built = [g.csr(), g.csc(torch.int32)]  # an int64 CSR alone, a CSC narrowed (rows' sources ascending)
    looped, looped_sampled = g.with_self_loops(), sampled.with_self_loops()
    fresh = Graph(*looped.coo(), sizes)
    assert ("csr",) in looped._cache and ("csc", torch.int32) in looped_sampled._cache  # carried, not rebuilt
    assert ("csc", torch.int32) not in looped._cache  # a loop appended last would break the ascending order
    for name, dtype in (("csr", torch.int64), ("csc", torch.int32)):
        got, expected = getattr(looped, name)(dtype), getattr(fresh, name)(dtype)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    carried, user_order = looped_sampled.csc(torch.int32), fresh.csc()
    assert all(torch.equal(a.long(), b) for a, b in zip(carried, user_order, strict=True))
    assert torch.equal(looped.in_degrees(), fresh.in_degrees())
    assert torch.equal(looped.out_degrees(), fresh.out_degrees())
    assert all(torch.equal(a, b) for a, b in zip(g.csr(), built[0], strict=True))  # the original's untouched


@pytest.mark.parametrize("sizes", [10, (9, 4)], ids=["square", "bipartite"])
def test_to_moves_edges_and_weights_and_keeps_the_sizes(sizes):
    """``Graph.to`` as PyG's ``Data.to``: the same graph on the device (the meta device stands in for a GPU
    here), itself where it is there already; weights travel along."""
    num_src, num_dst = sizes if isinstance(sizes, tuple) else (sizes, sizes)
    src, dst = torch.randint(0, num_src, (30,)), torch.randint(0, num_dst, (30,))
    g = Graph(src, dst, sizes, edge_weight=torch.rand(30))
    assert g.to("cpu") is g
    moved = g.to("meta")
    assert moved.device.type == "meta" and moved.edge_weight.device.type == "meta"
    assert (moved.num_src_nodes, moved.num_dst_nodes, moved.num_edges) == (num_src, num_dst, 30)
    assert moved.edge_index.shape == (2, 30) and moved.to("meta") is moved
    assert g.device.type == "cpu" and torch.equal(g.edge_index, torch.stack([src, dst]))


def _moved_by(move):
    """A sampled-block-like graph with its int32 CSR, degrees and self-loop graph built, and ``move`` of it."""
    src, dst = random_edges(40, 300, seed=3)
    g = Graph(src, dst % 25, (40, 25))
    built = (*g.csr(torch.int32), g.in_degrees(), *g.with_self_loops().csc(torch.int32))
    return g, built, move(g)


def test_a_moved_graph_carries_the_formats_degrees_and_self_loop_graph_it_had_built():
    g, built, moved = _moved_by(lambda graph: graph.to("meta"))
    assert moved.has_csr() and not moved.reverse().has_csr()  # the CSC had not been built here
    carried = (*moved.csr(torch.int32), moved.in_degrees(), *moved.with_self_loops().csc(torch.int32))
    assert all(
        m.device.type == "meta" and m.shape == b.shape and m.dtype == b.dtype
        for m, b in zip(carried, built, strict=True)
    )
    assert not g.to("meta").reverse().has_csr() and g.has_csr()


def test_a_graph_moved_to_the_gpu_carries_its_formats_equal(gpu):
    if gpu.type != "cuda":
        pytest.skip("needs a CUDA device")
    _, built, moved = _moved_by(lambda graph: graph.to(gpu))
    carried = (*moved.csr(torch.int32), moved.in_degrees(), *moved.with_self_loops().csc(torch.int32))
    assert all(torch.equal(m.cpu(), b) for m, b in zip(carried, built, strict=True))


# ---- graphs over borrowed arrays and the operators' token ----------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(num_src=st.integers(1, 30), num_dst=st.integers(1, 30), num_edges=st.integers(0, 90), seed=st.integers(0, 999))
def test_a_borrowed_graph_shares_the_arrays_and_aggregates_as_scipy(num_src, num_dst, num_edges, seed):
    """``Graph.borrowed`` keeps the given int64 arrays (no copy) and its kernels and formats are a copied graph's,
    bipartite included; its token is a copy in the index type, its ``edge_index`` an int64 one made once."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = (
        torch.randint(0, num_src, (num_edges,), generator=gen),
        torch.randint(0, num_dst, (num_edges,), generator=gen),
    )
    sizes = num_src if num_src == num_dst else (num_src, num_dst)
    g = Graph.borrowed(src, dst, sizes)
    assert g.coo()[0].data_ptr() == src.data_ptr() and g.coo()[1].data_ptr() == dst.data_ptr()
    x = torch.randn(num_src, 5, dtype=torch.float64, generator=gen)
    reference = sp.coo_matrix((np.ones(num_edges), (dst.numpy(), src.numpy())), shape=(num_dst, num_src)) @ x.numpy()
    np.testing.assert_allclose(ops.gspmm(g, "copy_lhs", "sum", x, None).numpy(), reference, atol=1e-12)
    token = g.ref().edge_index
    assert token.dtype == g.index_dtype == torch.int32 and torch.equal(token.long(), torch.stack([src, dst]))
    assert g.coo_row(0, torch.int32).data_ptr() == token.data_ptr()  # the edge templates' COO is the token
    edge_index = g.edge_index
    assert edge_index.dtype == torch.int64 and torch.equal(edge_index, torch.stack([src, dst]))
    assert g.edge_index is edge_index
    assert Graph.owning(token, num_src, num_dst) is g and Graph.owning(edge_index, num_src, num_dst) is g
    assert torch.equal(src, torch.randint(0, num_src, (num_edges,), generator=torch.Generator().manual_seed(seed)))


def test_a_borrowed_graph_of_other_id_types_owns_a_copy():
    src, dst = torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([1, 2, 0], dtype=torch.int32)
    g = Graph.borrowed(src, dst, 3)
    assert g.coo()[0].dtype == torch.int64 and g.edge_index.data_ptr() == g.ref().edge_index.data_ptr()


@pytest.mark.parametrize(
    ("src", "dst", "message"),
    [
        (torch.zeros(3, dtype=torch.int64), torch.zeros(2, dtype=torch.int64), "1-D of equal length"),
        (torch.zeros(2, 2, dtype=torch.int64), torch.zeros(2, 2, dtype=torch.int64), "1-D of equal length"),
    ],
)
def test_bad_borrowed_arrays(src, dst, message):
    with pytest.raises(ValueError, match=message):
        Graph.borrowed(src, dst, 3)


def test_derived_graphs_carry_a_narrow_token_and_an_int64_edge_index_made_once():
    src, dst = random_edges(40, 200, seed=3)
    g = Graph(src, dst, 40)
    assert g.ref().edge_index is g.edge_index  # the caller's edges: one int64 tensor for both
    for derived in (g.reverse(), g.with_self_loops()):
        token = derived.ref().edge_index
        assert token.dtype == torch.int32 and torch.equal(token.long(), torch.stack(derived.coo()))
        assert derived.edge_index.dtype == torch.int64 and derived.edge_index is derived.edge_index
        assert Graph.owning(token, 40, 40) is derived and Graph.owning(derived.edge_index, 40, 40) is derived
