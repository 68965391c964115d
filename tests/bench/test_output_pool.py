import json

import pytest

from featgraph.backends.cpu import buffers
from featgraph.cli import main


def test_bench_output_pool_times_each_work_with_the_pool_off_and_on_and_restores_its_bound(tmp_path):
    out = tmp_path / "output_pool.json"
    bound = buffers.POOL.max_free_bytes
    main([
        "bench", "output-pool", "--graphs", "uniform", "--scale", "0.002", "--dims", "8", "--threads", "1",
        "--repeat", "1", "--json", str(out),
    ])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert [r["work"] for r in rows] == ["fill an n x d output", "GCN aggregation (SpMM)", "GCN forward + backward"]
    for r in rows:
        assert (r["graph"], r["d"]) == ("uniform", 8)
        assert r["pool_off_ms"] > 0 and r["pool_on_ms"] > 0
        assert r["off_over_on"] == pytest.approx(r["pool_off_ms"] / r["pool_on_ms"])
    assert buffers.POOL.max_free_bytes == bound
