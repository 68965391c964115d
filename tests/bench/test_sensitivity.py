import pytest

from featgraph.bench import plots, sensitivity
from featgraph.datasets import uniform


def test_heatmap_times_every_partition_tile_pair_and_finds_the_best(tmp_path):
    g = uniform(200, 5, seed=0)
    h = sensitivity.heatmap("uniform", g, 6, threads=1, repeat=1, grid=(1, 2, 8))
    assert h.tiles == (1, 2)  # tiles wider than the features are left out
    assert len(h.ms) == 3 and all(len(row) == 2 for row in h.ms)
    p, t, best = h.best()
    assert best == min(min(row) for row in h.ms) and h.ms[h.partitions.index(p)][h.tiles.index(t)] == best
    text = sensitivity.heatmap_markdown(h)
    assert text.count("\n| ") == 3 and "heuristic default" in text
    if plots.available():
        assert sensitivity.draw_heatmap(h, tmp_path).exists()


def test_density_rows_grow_in_edges_and_compare_with_torch_sparse():
    rows = sensitivity.density_rows(300, 8, threads=1, repeat=1, degrees=(2, 6))
    assert [r.num_edges for r in rows] == [600, 1800]
    for r in rows:
        assert r.density_pct == pytest.approx(100 * r.num_edges / 300**2)
        assert r.speedup == pytest.approx(r.torch_sparse_ms / r.featgraph_ms)
    assert sensitivity.density_markdown(rows).count("\n") == 3
