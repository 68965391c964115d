import pytest
import torch

from featgraph import Graph
from featgraph.backends import cpu
from featgraph.bench import roofline


def test_triad_kernel_computes_the_triad_and_reports_bandwidth():
    a, b, c = torch.empty(1000), torch.rand(1000), torch.rand(1000)
    cpu.launch(cpu.compile_source(roofline.TRIAD_SOURCE), [a, b, c], [1000, 2])
    torch.testing.assert_close(a, b + 3 * c)
    assert roofline.triad_gbps(1, elements=1 << 16, repeat=1) > 0


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
    with pytest.raises(ValueError, match="no traffic model"):
        roofline.traffic("gat-train", g, d)


def test_place_puts_a_row_between_the_bounds():
    g = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    bytes_moved = roofline.traffic("gcn", g, 8)
    p = roofline.place("gcn", g, 8, ms=1e-3, gbps=1.0)
    assert p.perfect_ms == pytest.approx(bytes_moved.perfect / 1e6)
    assert p.no_reuse_ms == pytest.approx(bytes_moved.no_reuse / 1e6)
    assert p.x_perfect == pytest.approx(1e-3 / p.perfect_ms)
    assert p.vs_no_reuse == pytest.approx(p.no_reuse_ms / 1e-3)
