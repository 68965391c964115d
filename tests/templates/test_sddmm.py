import importlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import featgraph as fg
from featgraph import te
from featgraph.templates import edge_sum
from tests.conftest import random_edges

sddmm_module = importlib.import_module("featgraph.templates.sddmm")  # the package exports the function


def dot_udf(n: int, d: int, heads: int | None = None, dtype: str = "float32"):
    if heads is None:
        XV = te.placeholder((n, d), dtype=dtype, name="XV")

        def edgefunc(src, dst, eid):
            k = te.reduce_axis((0, d), name="k")
            return te.compute((1,), lambda i: te.sum(XV[src, k] * XV[dst, k], axis=k))

        return edgefunc
    XV = te.placeholder((n, heads, d), dtype=dtype, name="XV")

    def multi_head(src, dst, eid):
        k = te.reduce_axis((0, d), name="k")
        return te.compute((heads,), lambda h: te.sum(XV[src, h, k] * XV[dst, h, k], axis=k))

    return multi_head


@pytest.mark.parametrize("order", ["hilbert", "user", "csr"])
@pytest.mark.parametrize(("n", "e"), [(0, 0), (5, 0), (7, 3), (60, 500), (300, 4000)])
def test_dot_attention_in_user_edge_order(order, n, e):
    d = 19
    src, dst = random_edges(n, e, seed=n + e)
    g = fg.Graph(src, dst, n)
    x = torch.randn(n, d, dtype=torch.float64)
    got = fg.sddmm(g, dot_udf(n, d, dtype="float64"), edge_order=order)(XV=x)
    assert got.shape == (e, 1)
    torch.testing.assert_close(got, (x[src] * x[dst]).sum(1, keepdim=True))


@pytest.mark.parametrize(
    "fds",
    [
        None,
        lambda s, out: s.split(out.reduce_axis[0], 4).vectorize(out.reduce_axis[0]),
        lambda s, out: s.vectorize(out.axis[0]).vectorize(out.reduce_axis[0]),  # nested simd is resolved
        lambda s, out: s.reorder(out.reduce_axis[0], out.axis[0]).vectorize(out.axis[0]).vectorize(out.reduce_axis[0]),
        lambda s, out: s.split(out.reduce_axis[0], 4).vectorize(out.reduce_axis[0]).unroll(out.reduce_axis[0]),
        lambda s, out: s.vectorize(out.reduce_axis[0]).unroll(out.reduce_axis[0]),  # g++ takes one pragma
    ],
)
def test_multi_head_dot(fds):
    n, h, d = 50, 4, 11
    src, dst = random_edges(n, 400, seed=1)
    g = fg.Graph(src, dst, n)
    x = torch.randn(n, h, d)
    got = fg.sddmm(g, dot_udf(n, d, heads=h), fds=fds)(XV=x)
    assert got.shape == (400, h)
    torch.testing.assert_close(got, (x[src] * x[dst]).sum(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tiles", [1, 2, 5])
def test_vector_output_with_edge_data_and_feature_tiles(tiles):
    n, d = 40, 23
    src, dst = random_edges(n, 300, seed=2)
    g = fg.Graph(src, dst, n)
    XV = te.placeholder((n, d), dtype="float64", name="XV")
    EW = te.placeholder((g.num_edges,), dtype="float64", name="EW")

    def edgefunc(src, dst, eid):
        return te.compute((d,), lambda i: (XV[src, i] - XV[dst, i]) * EW[eid])

    x, w = torch.randn(n, d, dtype=torch.float64), torch.randn(g.num_edges, dtype=torch.float64)
    got = fg.sddmm(g, edgefunc, num_feature_tiles=tiles)(XV=x, EW=w)
    torch.testing.assert_close(got, (x[src] - x[dst]) * w.unsqueeze(1))


@pytest.mark.parametrize("order", ["hilbert", "csr", "user"])
@pytest.mark.parametrize("buckets", [1, 3, 64, 10_000])
@pytest.mark.parametrize("tiles", [1, 3])
def test_staged_writes_land_at_user_edge_ids(order, buckets, tiles):
    """Staged through write buckets (fewer and more buckets than edges, feature tiles, edge data), every
    row still lands at its user edge id."""
    n, d = 70, 13
    src, dst = random_edges(n, 900, seed=buckets + tiles)
    g = fg.Graph(src, dst, n)
    XV = te.placeholder((n, d), dtype="float64", name="XV")
    EW = te.placeholder((g.num_edges, 2), dtype="float64", name="EW")

    def edgefunc(s, t, e):
        return te.compute((2, d), lambda h, i: XV[s, i] * XV[t, i] + EW[e, h])

    x, w = torch.randn(n, d, dtype=torch.float64), torch.randn(g.num_edges, 2, dtype=torch.float64)
    kernel = fg.sddmm(g, edgefunc, edge_order=order, write_buckets=buckets, num_feature_tiles=tiles)
    assert kernel.spec.params.write_buckets == buckets
    expected = (x[src] * x[dst]).unsqueeze(1) + w.unsqueeze(2)
    torch.testing.assert_close(kernel(XV=x, EW=w), expected)
    torch.testing.assert_close(kernel(XV=x, EW=w), expected)  # a pooled staging buffer reused


@pytest.mark.parametrize(("n", "e"), [(0, 0), (4, 0), (3, 1)])
def test_staged_writes_on_empty_and_single_edge_graphs(n, e):
    src, dst = random_edges(n, e, seed=5) if n else (torch.zeros(0, dtype=torch.long),) * 2
    g = fg.Graph(src, dst, n)
    x = torch.randn(n, 6, dtype=torch.float64)
    got = fg.sddmm(g, dot_udf(n, 6, dtype="float64"), write_buckets=8)(XV=x)
    torch.testing.assert_close(got, (x[src] * x[dst]).sum(1, keepdim=True))


@pytest.mark.parametrize("index", [torch.int64, torch.int32])
def test_write_staging_groups_slots_by_bucket_and_inverts_them(index):
    g = fg.Graph(*random_edges(50, 1000, seed=6), 50)
    ids = g.edge_order("hilbert")
    slots, sources = sddmm_module.write_staging(g, "hilbert", index, 8)
    assert slots.dtype == sources.dtype == index
    slots, sources = slots.long(), sources.long()
    assert torch.equal(torch.sort(slots).values, torch.arange(1000))  # a permutation of the staging rows
    staged_ids = torch.empty_like(ids)
    staged_ids[slots] = ids  # the user edge id each staging row holds
    assert torch.equal(staged_ids // 125, torch.sort(staged_ids // 125).values)  # rows grouped by bucket
    assert torch.equal(staged_ids[sources], torch.arange(1000))  # output row e reads e's staging row
    within = [slots[(ids // 125) == b] for b in range(8)]  # visit order kept inside each bucket
    assert all(torch.equal(s, torch.sort(s).values) for s in within)


def test_default_stages_scattered_writes_only(monkeypatch):
    monkeypatch.setattr(
        sddmm_module, "default_write_buckets", lambda output, jump, row: 7 if jump > 2000 else 0
    )  # bytes
    n, e = 400, 20_000
    src, dst = random_edges(n, e, seed=7)
    shuffled = fg.Graph(src, dst, n)
    order = torch.argsort(src * n + dst)  # as PyG's coalesce sorts an edge_index
    coalesced = fg.Graph(src[order], dst[order], n)
    assert sddmm_module.median_write_jump(shuffled, "hilbert") > 1000
    assert sddmm_module.median_write_jump(coalesced, "hilbert") < 200
    assert sddmm_module.median_write_jump(shuffled, "user") == 1
    dot = dot_udf(n, 64)  # gathers 128x what it writes: the CSR walked (``params.cpu_edge_order``), one segment
    assert fg.sddmm(shuffled, dot).spec.params.edge_order == "csr"
    assert fg.sddmm(shuffled, dot).spec.params.write_buckets == 7
    assert fg.sddmm(coalesced, dot).spec.params.write_buckets == 0
    assert fg.sddmm(shuffled, dot, edge_order="user").spec.params.write_buckets == 0
    assert fg.sddmm(shuffled, dot, write_buckets=3).spec.params.write_buckets == 3


def test_default_stages_one_score_an_edge_and_writes_several_directly(monkeypatch):
    """On a scattered edge list whose output exceeds the L2, one float32 score an edge is staged, GAT's four
    (16 bytes a row) and a float64 pair are written directly (``params.STAGED_MAX_ROW_BYTES``); both agree
    with the user's order."""
    from featgraph.templates import params

    monkeypatch.setattr(params, "l2_cache_bytes", lambda: 1024)
    n, e = 400, 100_000  # consecutive Hilbert-order writes land about E / 3 edges apart: over the window
    g = fg.Graph(*random_edges(n, e, seed=7), n)
    x = torch.randn(n, 256, generator=torch.Generator().manual_seed(1))
    for heads, dtype, staged in ((None, "float32", True), (4, "float32", False), (2, "float64", False)):
        dot = dot_udf(n, 256 if heads is None else 256 // heads, heads, dtype)
        kernel = fg.sddmm(g, dot)
        assert kernel.spec.params.edge_order == "csr" and (kernel.spec.params.write_buckets > 0) == staged
        values = x.to(getattr(torch, dtype)) if heads is None else x.to(getattr(torch, dtype)).view(n, heads, -1)
        user = fg.sddmm(g, dot, edge_order="user")
        torch.testing.assert_close(kernel(XV=values), user(XV=values))


def test_default_cpu_edge_order_follows_the_traffic():
    """The user's order where an edge streams (writes its output row, reads its edge data) at least an eighth
    of what it gathers from its endpoints, or gathers under 512 bytes; the kernels' CSR walked where long
    gathered rows dominate."""
    n = 50
    g = fg.Graph(*random_edges(n, 400, seed=2), n)
    A, B = te.placeholder((n, 4), name="A"), te.placeholder((n, 4), name="B")
    E = te.placeholder((400, 4), name="E")
    add = fg.sddmm(g, lambda s, t, e: te.compute((4,), lambda i: A[s, i] + B[t, i]))
    assert sddmm_module.edge_traffic(add.spec.op) == (32, 16)
    assert add.spec.params.edge_order == "user" and add.spec.params.write_buckets == 0
    scaled = fg.sddmm(g, lambda s, t, e: te.compute((4,), lambda i: A[s, i] * E[e, i]))
    assert sddmm_module.edge_traffic(scaled.spec.op) == (16, 32)
    assert scaled.spec.params.edge_order == "user"
    for d, order in ((4, "user"), (63, "user"), (64, "csr"), (128, "csr")):  # a dot gathers 8d bytes
        assert fg.sddmm(g, dot_udf(n, d)).spec.params.edge_order == order
    assert fg.sddmm(g, dot_udf(n, 64), edge_order="user").spec.params.edge_order == "user"  # asked for


def test_bad_sddmm_arguments():
    g = fg.Graph(*random_edges(10, 30, seed=3), 10)
    with pytest.raises(ValueError, match="edge_order must be one of"):
        fg.sddmm(g, dot_udf(10, 4), edge_order="random")
    EW = te.placeholder((29,), name="EW")
    with pytest.raises(ValueError, match="needs 30 rows"):
        fg.sddmm(g, lambda s, t, e: te.compute((1,), lambda i: EW[e]))
    with pytest.raises(ValueError, match="write_buckets must be >= 0"):
        fg.sddmm(g, dot_udf(10, 4), write_buckets=-1)
    with pytest.raises(ValueError, match="write_buckets stages CPU writes"):
        fg.sddmm(g, dot_udf(10, 4), target="gpu", write_buckets=4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"edge_order": "csr", "num_partitions": 0}, ValueError, "num_partitions must be a whole number >= 1"),
        ({"edge_order": "csr", "num_partitions": 2.0}, ValueError, "num_partitions must be a whole number >= 1"),
        ({"edge_order": "csr", "num_partitions": True}, ValueError, "num_partitions must be a whole number >= 1"),
        ({"edge_order": "hilbert", "num_partitions": 2}, ValueError, "it needs edge_order='csr', got 'hilbert'"),
        ({"edge_order": "user", "num_partitions": 3}, ValueError, "it needs edge_order='csr', got 'user'"),
        ({"edge_order": "csr", "num_partitions": 2, "write_buckets": 4}, ValueError, "num_partitions > 1 takes 0"),
        (
            {"edge_order": "csr", "num_partitions": 2, "target": "gpu"},
            ValueError,
            "target='gpu' takes num_partitions=1",
        ),
    ],
)
def test_bad_segment_counts_are_refused_by_name(kwargs, error, message):
    g = fg.Graph(*random_edges(10, 30, seed=3), 10)
    with pytest.raises(error, match=message):
        fg.sddmm(g, dot_udf(10, 4), **kwargs)


def test_edge_sum_refuses_segments_it_would_not_walk():
    g = fg.Graph(*random_edges(10, 30, seed=3), 10)
    with pytest.raises(ValueError, match="num_partitions: edge_sum visits an edge list"):
        edge_sum(g, dot_udf(10, 4), edge_order="csr", num_partitions=2)


@settings(max_examples=40, deadline=None)
@given(
    num_src=st.integers(1, 40),
    num_dst=st.integers(1, 40),
    e=st.integers(0, 300),
    d=st.integers(1, 19),
    parts=st.integers(1, 7),
    staged=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_the_csr_walked_in_source_segments_against_dense(num_src, num_dst, e, d, parts, staged, seed):
    """An SDDMM reading source, destination and edge data, visiting the kernels' CSR one source segment at a
    time, against the same expression evaluated per edge with torch: any segment count (more than there are
    sources too), bipartite graphs, duplicate edges, self loops, isolated vertices, odd widths; staged writes
    with one segment; the inputs untouched. The segments are pointers into the CSR: the walk keeps no edge
    list."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, num_src, (e,), generator=gen), torch.randint(0, num_dst, (e,), generator=gen)
    sizes = num_src if num_src == num_dst else (num_src, num_dst)
    g = fg.Graph(src, dst, sizes)
    A, B = te.placeholder((num_src, d), name="A"), te.placeholder((num_dst, d), name="B")
    W = te.placeholder((e, 2), name="W")

    def edgefunc(s, t, eid):
        k = te.reduce_axis((0, d), name="k")
        return te.compute((2,), lambda i: te.sum(A[s, k] * B[t, k], axis=k) * W[eid, i] + B[t, i % d])

    parts = 1 if staged else parts  # staged writes follow a walk in one segment
    kernel = fg.sddmm(g, edgefunc, edge_order="csr", num_partitions=parts, write_buckets=3 if staged else 0)
    a, b, w = (torch.randn(*shape, generator=gen) for shape in ((num_src, d), (num_dst, d), (e, 2)))
    before = [t.clone() for t in (a, b, w)]
    want = (a[src] * b[dst]).sum(1, keepdim=True) * w + b[dst][:, torch.arange(2) % d]
    torch.testing.assert_close(kernel(A=a, B=b, W=w), want, rtol=1e-5, atol=1e-5)
    assert all(torch.equal(x, y) for x, y in zip((a, b, w), before, strict=True))
    assert not any(key[0] == "edge_list" for key in g._cache)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 30), e=st.integers(0, 200), d=st.integers(1, 17), seed=st.integers(0, 1000))
def test_property_dot_on_random_graphs(n, e, d, seed):
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    got = fg.sddmm(fg.Graph(src, dst, n), dot_udf(n, d, dtype="float64"))(XV=x)
    torch.testing.assert_close(got, (x[src] * x[dst]).sum(1, keepdim=True))


@pytest.mark.parametrize("target", ["cpu", "gpu"])
def test_infinite_and_nan_constants(target, request):
    """A UDF may hold inf, -inf and nan constants: each backend writes them as its own literals."""
    if target == "gpu":
        request.getfixturevalue("interpreted_gpu")
    g = fg.Graph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 2]), 3)
    X = te.placeholder((3, 2), dtype="float64", name="X")
    x = torch.tensor([[1.0, -1.0], [0.5, 2.0], [-3.0, 0.0]], dtype=torch.float64)

    def udf(s, d, e):
        return te.compute(
            (3,),
            lambda i: (
                te.where(i < 2, te.where(X[s, i % 2] > 0, X[s, i % 2], float("-inf")), te.min(X[d, 0], float("inf")))
                + te.where(X[s, 0] > 100, float("nan"), 0.0)
            ),
        )

    src, dst = g.coo()
    positive = torch.where(x[src] > 0, x[src], torch.tensor(float("-inf"), dtype=torch.float64))
    want = torch.cat([positive, x[dst, :1]], dim=1)
    torch.testing.assert_close(fg.sddmm(g, udf, target=target)(X=x), want)


def test_a_bipartite_graph_is_visited_in_its_own_edge_order():
    """A sampled block serves one step: ordering its edges would cost more than it saves, even for a UDF that a
    square graph visits in the kernels' CSR order (``params.cpu_edge_order``)."""
    g = fg.Graph(torch.tensor([0, 5, 3, 2]), torch.tensor([1, 0, 2, 1]), (6, 3))
    X = te.placeholder((6, 128), name="X")

    def norm(s, d, e):
        k = te.reduce_axis((0, 128), name="k")
        return te.compute((1,), lambda i: te.sum(X[s, k] * X[s, k], axis=k))

    kernel = fg.sddmm(g, norm)
    assert kernel.spec.params.edge_order == "user" and not g.has_csr()
    x = torch.randn(6, 128)
    torch.testing.assert_close(kernel(X=x), (x * x).sum(1, keepdim=True)[g.coo()[0]])
    square = fg.Graph(*g.coo(), 6)
    assert fg.sddmm(square, norm).spec.params.edge_order == "csr"
