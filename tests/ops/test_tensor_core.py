"""Tensor-core SpMM against scipy and SDDMM against per-edge dots, in both tile shapes (16 x 16 tiles and 8 x 1
vectors): weighted and unweighted, directed graphs (the backward uses the transposed graph), widths that are not
multiples of 16, the awkward graphs, duplicates, and gradcheck in float64."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from tests.conftest import adjacency, random_edges


def case(gpu, n, e, seed=0):
    src, dst = random_edges(n, e, seed)
    if e > 10:
        dst[: e // 3] = 0  # a hub: one window with many blocks
    return fg.Graph(src.to(gpu), dst.to(gpu), n), src, dst


# 8-row windows on the awkward graphs: the hypothesis test below; here on the largest, whose hub fills many blocks
WITH_TILE_ROWS = [pytest.param(130, 1500, 8, id="130-1500-8x1")]


@pytest.mark.parametrize(("n", "e", "tile_rows"), [(0, 0, 16), (5, 0, 16), (7, 3, 16), (40, 300, 16), (130, 1500, 16),
                                                   *WITH_TILE_ROWS])  # fmt: skip
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("d", [1, 20, 33])
def test_tc_spmm_matches_scipy(gpu, n, e, weighted, d, tile_rows):
    g, src, dst = case(gpu, n, e, seed=n + d)
    x = torch.randn(n, d, dtype=torch.float64)
    w = torch.rand(e, dtype=torch.float64) if weighted else None
    got = ops.tc_spmm(g, x.to(gpu), None if w is None else w.to(gpu), tile_rows).cpu().numpy()
    want = adjacency(src, dst, n, None if w is None else w.numpy()) @ x.numpy()
    np.testing.assert_allclose(got, want.reshape(n, d), rtol=1e-10, atol=1e-10)


def test_tc_spmm_in_float32_is_tf32_close(gpu):
    g, src, dst = case(gpu, 100, 900)
    x = torch.randn(100, 24)
    got = ops.tc_spmm(g, x.to(gpu)).cpu().numpy()
    np.testing.assert_allclose(got, adjacency(src, dst, 100) @ x.numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tc_spmm_half_inputs_accumulate_in_float32(gpu, dtype):
    if dtype == torch.bfloat16 and gpu.type == "cpu":
        pytest.skip("Triton 3.9's interpreter computes tl.dot of bfloat16 blocks wrongly (checked on a 16x16 block)")
    g, src, dst = case(gpu, 60, 400)
    x = torch.randn(60, 16).to(dtype)
    got = ops.tc_spmm(g, x.to(gpu))
    assert got.dtype == dtype
    want = adjacency(src, dst, 60) @ x.float().numpy()
    np.testing.assert_allclose(got.float().cpu().numpy(), want, rtol=3e-2, atol=3e-2)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(0, 40),
    edges=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=120),
    d=st.integers(1, 21),
    tile_rows=st.sampled_from([16, 8]),
    weighted=st.booleans(),
)
def test_both_tile_shapes_aggregate_and_score_any_graph_as_dense_float64(gpu, n, edges, d, tile_rows, weighted):
    """Random graphs (duplicates, self loops, isolated and empty windows, empty graphs): ``tc_spmm`` against
    the dense adjacency product and ``tc_sddmm`` against per-edge dots, exact in float64."""
    edges = [(u % n, v % n) for u, v in edges] if n else []
    src = torch.tensor([u for u, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v for _, v in edges], dtype=torch.int64)
    g = fg.Graph(src.to(gpu), dst.to(gpu), n)
    x, y = torch.randn(n, d, dtype=torch.float64), torch.randn(n, d, dtype=torch.float64)
    w = torch.rand(len(edges), dtype=torch.float64) if weighted else None
    dense = torch.zeros(n, n, dtype=torch.float64)
    dense.index_put_((dst, src), torch.ones(len(edges), dtype=torch.float64) if w is None else w, accumulate=True)
    got = ops.tc_spmm(g, x.to(gpu), None if w is None else w.to(gpu), tile_rows)
    torch.testing.assert_close(got.cpu(), dense @ x)
    torch.testing.assert_close(ops.tc_sddmm(g, x.to(gpu), y.to(gpu), tile_rows).cpu(), (x[src] * y[dst]).sum(1))


@pytest.mark.parametrize("tile_rows", [16, 8])
def test_tc_spmm_gradients_gradcheck_on_a_directed_graph(gpu, tile_rows):
    g, _, _ = case(gpu, 20, 70, seed=4)
    x = torch.randn(20, 5, dtype=torch.float64, device=gpu, requires_grad=True)
    w = torch.rand(70, dtype=torch.float64, device=gpu, requires_grad=True)
    assert gradcheck(lambda a, b: ops.tc_spmm(g, a, b, tile_rows), (x, w), fast_mode=True)


def test_tc_spmm_rejects_bad_input(gpu):
    g, _, _ = case(gpu, 10, 30)
    x = torch.randn(10, 4, device=gpu)
    with pytest.raises(ValueError, match=r"x: expected 10 rows"):
        ops.tc_spmm(g, torch.randn(9, 4, device=gpu))
    with pytest.raises(TypeError, match="x: expected a floating tensor"):
        ops.tc_spmm(g, torch.ones(10, 4, dtype=torch.int64, device=gpu))
    with pytest.raises(ValueError, match="edge_weight: expected 30 rows"):
        ops.tc_spmm(g, x, torch.rand(29, device=gpu))
    for tile_rows in (4, 32, True, "8", None, 16.0):
        with pytest.raises(ValueError, match=r"tile_rows must be 16 \(TC-GNN's 16 x 16 tiles\) or 8"):
            ops.tc_spmm(g, x, tile_rows=tile_rows)
        with pytest.raises(ValueError, match="tile_rows must be 16"):
            ops.tc_sddmm(g, x, x, tile_rows=tile_rows)


@pytest.mark.parametrize(("n", "e", "tile_rows"), [(0, 0, 16), (5, 0, 16), (7, 3, 16), (40, 300, 16), (130, 1500, 16),
                                                   *WITH_TILE_ROWS])  # fmt: skip
@pytest.mark.parametrize("d", [1, 20, 33])
def test_tc_sddmm_matches_the_dot_of_each_edges_endpoints(gpu, n, e, d, tile_rows):
    g, src, dst = case(gpu, n, e, seed=n + 2 * d)
    if e:
        src[: e // 4], dst[: e // 4] = src[0], dst[0]  # duplicates share a cell: each edge still gets the dot
    g = fg.Graph(src.to(gpu), dst.to(gpu), n)
    a, b = torch.randn(n, d, dtype=torch.float64), torch.randn(n, d, dtype=torch.float64)
    got = ops.tc_sddmm(g, a.to(gpu), b.to(gpu), tile_rows).cpu()
    assert got.shape == (e,)
    torch.testing.assert_close(got, (a[src] * b[dst]).sum(1))


@pytest.mark.parametrize("tile_rows", [16, 8])
def test_tc_sddmm_gradcheck_on_a_directed_graph(gpu, tile_rows):
    g, _, _ = case(gpu, 12, 70, seed=3)
    a = torch.randn(12, 5, dtype=torch.float64, device=gpu, requires_grad=True)
    b = torch.randn(12, 5, dtype=torch.float64, device=gpu, requires_grad=True)
    assert gradcheck(lambda x, y: ops.tc_sddmm(g, x, y, tile_rows), (a, b), fast_mode=True)


def test_tc_sddmm_rejects_mismatched_features(gpu):
    g, _, _ = case(gpu, 10, 30)
    with pytest.raises(ValueError, match="x_src and x_dst must match"):
        ops.tc_sddmm(g, torch.randn(10, 4, device=gpu), torch.randn(10, 5, device=gpu))
    with pytest.raises(ValueError, match="x_src: expected 10 rows"):
        ops.tc_sddmm(g, torch.randn(9, 4, device=gpu), torch.randn(9, 4, device=gpu))


@pytest.mark.parametrize("method", ["rcm", "community"])
def test_tc_spmm_on_a_reordered_graph_gives_the_same_rows_and_gradients(gpu, method):
    from featgraph.datasets.synthetic import community
    from featgraph.graph.reorder import inverse_order

    made = community(120, 6, 16, seed=2)
    g = fg.Graph(made.coo()[0].to(gpu), made.coo()[1].to(gpu), 120)
    ordered, order = g.reordered(method)
    x = torch.randn(120, 7, dtype=torch.float64, device=gpu, requires_grad=True)
    w = torch.rand(g.num_edges, dtype=torch.float64, device=gpu, requires_grad=True)
    out = ops.tc_spmm(ordered, x[order], w)[inverse_order(order)]  # the edges keep their order: w as it is
    want = adjacency(*(t.cpu() for t in g.coo()), 120, w.detach().cpu().numpy()) @ x.detach().cpu().numpy()
    np.testing.assert_allclose(out.detach().cpu().numpy(), want, rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, w), grad)
    expected = torch.autograd.grad(ops.tc_spmm(g, x, w), (x, w), grad)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)


def test_an_unweighted_graphs_tiles_are_kept_per_dtype(gpu):
    g, src, dst = case(gpu, 50, 300)
    x = torch.randn(50, 8, dtype=torch.float64, device=gpu)
    first = ops.tc_spmm(g, x)
    tiles = g.cached(("tc-tiles", 16, torch.float64), lambda: pytest.fail("the first call keeps its tiles"))
    torch.testing.assert_close(ops.tc_spmm(g, x), first)
    assert g.cached(("tc-tiles", 16, torch.float64), lambda: None) is tiles
    np.testing.assert_allclose(first.cpu().numpy(), adjacency(src, dst, 50) @ x.cpu().numpy(), rtol=1e-10)
