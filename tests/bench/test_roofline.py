import pytest
import torch

from featgraph import Graph
from featgraph.bench import roofline
from featgraph.native import compile_source, launch
from featgraph.native.sources import cpp_source


def test_triad_kernel_computes_the_triad_and_reports_bandwidth():
    a, b, c = torch.empty(1000), torch.rand(1000), torch.rand(1000)
    launch(compile_source(cpp_source("triad.cpp")), [a, b, c], [1000, 2])
    torch.testing.assert_close(a, b + 3 * c)
    assert roofline.triad_gbps(1, elements=1 << 16, repeat=1) > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("width", [8, 24, 128, 192])
def test_gather_kernel_sums_the_rows_it_is_given_and_reports_bandwidth(width, dtype):
    a = torch.rand(50, width).to(dtype)
    rows, sums = torch.randint(0, 50, (301,), dtype=torch.int32), torch.empty(2)
    name = str(dtype).removeprefix("torch.")
    launch(compile_source(roofline.gather_source(width, name)), [a, rows, sums], [rows.numel(), 2])
    expected = a.double()[rows.long()].sum().item()
    assert sums.double().sum().item() == pytest.approx(expected, rel=1e-4)
    assert roofline.gather_gbps(2, 1 << 16, width * dtype.itemsize, repeat=1, dtype=name) > 0


def test_traffic_models_count_rows_once_or_per_edge():
    g = Graph(torch.tensor([0, 0, 1, 2, 2]), torch.tensor([1, 2, 2, 0, 1]), 3)
    n, e, d, csr = 3, 5, 4, (3 + 1) * 4 + 5 * 4
    gcn = roofline.traffic("gcn", g, d)
    assert gcn.perfect == n * d * 4 + n * d * 4 + csr
    assert gcn.no_reuse == e * d * 4 + n * d * 4 + csr
    attention = roofline.traffic("attention", g, d)
    assert attention.perfect == n * d * 4 + e * 4 + 2 * e * 4
    assert attention.no_reuse == 2 * e * d * 4 + e * 4 + 2 * e * 4
    mlp = roofline.traffic("mlp", g, d)
    assert mlp.no_reuse - mlp.perfect == (2 * e - n) * roofline.MLP_INPUT_WIDTH * 4
    assert (gcn.gathered, gcn.array, gcn.row) == (e * d * 4, n * d * 4, d * 4)
    assert (attention.gathered, attention.array, attention.row) == (2 * e * d * 4, n * d * 4, d * 4)
    width = roofline.MLP_INPUT_WIDTH * 4
    assert (mlp.gathered, mlp.array, mlp.row) == (2 * e * width, n * width, width)
    looped = roofline.traffic("gcn", g.with_self_loops(), d)
    train = roofline.traffic("gcn-train", g, d)
    assert (train.perfect, train.no_reuse, train.gathered, train.array, train.row) == (
        2 * looped.perfect, 2 * looped.no_reuse, 2 * looped.gathered, looped.array, looped.row
    )  # fmt: skip
    with pytest.raises(ValueError, match="no traffic model"):
        roofline.traffic("gat-train", g, d)


def test_place_puts_a_row_between_the_bounds():
    g = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    bytes_moved = roofline.traffic("gcn", g, 8)
    p = roofline.place(bytes_moved, ms=1e-3, gbps=1.0, gather_rate=4.0)
    assert p.perfect_ms == pytest.approx(bytes_moved.perfect / 1e6)
    assert p.no_reuse_ms == pytest.approx(bytes_moved.no_reuse / 1e6)
    assert p.gather_ms == pytest.approx(bytes_moved.gathered / 4e6)
    assert p.x_perfect == pytest.approx(1e-3 / p.perfect_ms)
    assert p.vs_no_reuse == pytest.approx(p.no_reuse_ms / 1e-3)
    assert p.x_gather == pytest.approx(1e-3 / p.gather_ms)


def test_reuse_needed_is_the_share_of_row_reads_the_time_budget_cannot_gather():
    bytes_moved = roofline.Traffic(perfect=300, no_reuse=1000, gathered=800, array=400, row=16)
    # at 1 GB/s (1e6 bytes per ms) a target of 4e-4 ms gathers 400 of the 800 row bytes
    assert roofline.reuse_needed(bytes_moved, 4e-4, 1.0) == pytest.approx(0.5)
    assert roofline.reuse_needed(bytes_moved, 8e-4, 1.0) == 0.0  # gathering every row fits
    assert roofline.reuse_needed(bytes_moved, 1e-4, 2.0) == pytest.approx(0.75)
    assert roofline.reuse_needed(roofline.Traffic(1, 1, 0, 1, 1), 1e-9, 1.0) == 0.0  # nothing gathered


def test_reuse_possible_is_the_better_of_chance_and_2d_blocks(monkeypatch):
    monkeypatch.setattr(roofline, "cache_sizes", lambda: {2: 1000})
    sparse = Graph(torch.tensor([0, 1]), torch.tensor([1, 2]), 100)  # 2 edges among 100 vertices
    assert roofline.reuse_possible(sparse, roofline.Traffic(1, 1, 1, array=4000, row=4)) == 0.25  # chance
    assert roofline.reuse_possible(sparse, roofline.Traffic(1, 1, 1, array=500, row=4)) == 1.0
    # 10,000 edges among 100 vertices, 250 rows in cache: 250 edges per cached row, blocks move
    # (1 + sqrt 2)^2 / 250 of a row per edge
    dense = Graph(torch.arange(10_000) % 100, torch.arange(10_000) // 100, 100)
    blocked = roofline.reuse_possible(dense, roofline.Traffic(1, 1, 1, array=400_000, row=4))
    assert blocked == pytest.approx(1 - (1 + 2**0.5) ** 2 / 250)
    monkeypatch.setattr(roofline, "cache_sizes", lambda: {})
    assert roofline.reuse_possible(dense, roofline.Traffic(1, 1, 1, array=500, row=4)) == 0.0
