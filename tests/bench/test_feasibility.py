import json

import pytest
import torch

from featgraph import Graph
from featgraph.bench import feasibility, roofline
from featgraph.cli import main


@pytest.fixture
def machine_rates(monkeypatch):
    """Fixed bandwidths (1 GB/s triad, 2 GB/s gathered) and a 100-byte private cache."""
    monkeypatch.setattr(feasibility, "triad_gbps", lambda threads: 1.0)
    monkeypatch.setattr(feasibility, "gather_gbps", lambda threads, array_bytes, row_bytes: 2.0)
    monkeypatch.setattr(roofline, "cache_sizes", lambda: {2: 100})


def small_graph() -> Graph:
    return Graph(torch.tensor([0, 1, 2, 3, 3]), torch.tensor([1, 2, 3, 0, 2]), 4)


def test_targets_apply_to_their_graphs_and_widths():
    three_x, every_d, _, perfect = feasibility.TARGETS
    assert three_x.applies("rand100k", 128) and not three_x.applies("rand100k", 256)
    assert every_d.applies("uniform", 32)
    assert perfect.applies("uniform", 128) and not perfect.applies("uniform", 64)
    assert not perfect.applies("rand100k", 512)


def test_target_time_is_the_baseline_over_the_factor_or_a_multiple_of_perfect_reuse(machine_rates):
    g, d = small_graph(), 8
    three_x, *_, perfect = feasibility.TARGETS
    bytes_moved = roofline.traffic("gcn", g, d)
    assert three_x.time_ms(bytes_moved, 2, baseline_ms=9.0) == 3.0
    with pytest.raises(ValueError, match="needs the time of"):
        three_x.time_ms(bytes_moved, 2, baseline_ms=None)
    assert perfect.time_ms(bytes_moved, 2, None) == pytest.approx(5 * bytes_moved.perfect / 1e6)


def test_rows_pair_featgraph_with_its_baseline_and_give_a_verdict(machine_rates):
    g = small_graph()
    graphs = {"uniform": g}
    bytes_moved = roofline.traffic("gcn", g, 128)
    bound = bytes_moved.gathered / 2e6
    times = {
        ("gcn", "uniform", 128, 2, "featgraph"): bound,
        ("gcn", "uniform", 128, 2, feasibility.TORCH_SPARSE): 2 * bound,  # 3x: out of reach, 2x: met
        ("gcn", "uniform", 64, 2, "featgraph"): 1.0,  # no baseline measured: no torch row at d=64
        ("gcn-train", "uniform", 128, 2, "featgraph"): 1.0,
    }
    rows = {(r.target, r.d): r for r in feasibility.rows_from(times, graphs)}
    three_x, every_d, _, perfect = (t.name for t in feasibility.TARGETS)
    assert set(rows) == {(three_x, 128), (every_d, 128), (perfect, 128)}
    assert rows[every_d, 128].verdict == "met"
    slow = rows[three_x, 128]
    assert slow.target_ms == pytest.approx(2 * bound / 3)
    assert slow.gather_ms == pytest.approx(bound)
    assert slow.reuse_needed == pytest.approx(roofline.reuse_needed(bytes_moved, slow.target_ms, 2.0))
    assert slow.reuse_possible == roofline.reuse_possible(g, bytes_moved)
    assert slow.reuse_needed > slow.reuse_possible and slow.verdict == "out of reach here"
    slow.reuse_possible = 1.0
    assert slow.verdict == "not met; within reach"


def test_bench_feasibility_measures_featgraph_and_the_baselines(tmp_path):
    out = tmp_path / "feasibility.json"
    main([
        "bench", "feasibility", "--graphs", "uniform", "rand100k", "--scale", "0.004", "--dims", "128",
        "--threads", "1", "--repeat", "1", "--json", str(out),
    ])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    targets = {r["target"] for r in rows}
    three_x, every_d, dgl, perfect = (t.name for t in feasibility.TARGETS)
    assert {three_x, every_d, perfect} <= targets <= {three_x, every_d, dgl, perfect}
    assert {r["graph"] for r in rows if r["target"] == perfect} == {"uniform"}
    for r in rows:
        if r["baseline_ms"] is not None:
            factor = {three_x: 3.0, every_d: 2.0, dgl: 1.5}[r["target"]]
            assert r["target_ms"] == pytest.approx(r["baseline_ms"] / factor)
        assert r["verdict"] in ("met", "out of reach here", "not met; within reach")
