import json

import pytest

from featgraph.backends.cpu import buffers
from featgraph.cli import main


def test_bench_output_pool_times_each_work_three_ways_and_restores_the_pools_settings(tmp_path):
    out = tmp_path / "output_pool.json"
    fields = ("max_free_bytes", "huge_pages", "keep_huge", "min_bytes")
    settings = [getattr(buffers.POOL, name) for name in fields]
    main([
        "bench", "output-pool", "--graphs", "uniform", "--scale", "0.002", "--dims", "8", "--threads", "1",
        "--repeat", "1", "--json", str(out),
    ])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert [r["work"] for r in rows] == ["fill an n x d output", "GCN aggregation (SpMM)", "GCN forward + backward"]
    for r in rows:
        assert (r["graph"], r["d"]) == ("uniform", 8)
        assert r["fresh_4k_ms"] > 0 and r["recycled_ms"] > 0
        assert r["fresh_4k_over_recycled"] == pytest.approx(r["fresh_4k_ms"] / r["recycled_ms"])
        if buffers.huge_pages_available():
            assert r["fresh_huge_over_recycled"] == pytest.approx(r["fresh_huge_ms"] / r["recycled_ms"])
        else:
            assert r["fresh_huge_ms"] is None and r["fresh_huge_over_recycled"] is None
    assert [getattr(buffers.POOL, name) for name in fields] == settings
