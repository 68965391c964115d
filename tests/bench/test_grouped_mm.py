import json

import pytest

from featgraph.bench import grouped_mm
from featgraph.cli import main


def test_skewed_lengths_sum_to_the_rows_and_fall():
    lengths = grouped_mm.skewed_lengths(266, 10_000, 1.2)
    assert len(lengths) == 266 and sum(lengths) == 10_000
    assert lengths == sorted(lengths, reverse=True) and lengths[-1] >= 0


def test_bench_grouped_mm_times_both_paths(gpu, tmp_path, capsys, monkeypatch):
    out = tmp_path / "grouped.json"
    monkeypatch.setitem(grouped_mm.CASES, "16 relations", (16, 60_000, 1.0, ((16, 16),)))  # narrow: interpreted fast
    cases = ["16 relations", "4 node types"]
    argv = ["bench", "grouped-mm", "--device", gpu.type, "--scale", "0.0003", "--repeat", "1", "--cases", *cases]
    main([*argv, "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["case"], r["inner"]) for r in rows] == [
        (case, inner) for case in cases for inner, _ in grouped_mm.CASES[case][3]
    ]
    for r in rows:
        assert r["featgraph_ms"] > 0 and r["loop_ms"] > 0
        assert r["loop_over_featgraph"] == pytest.approx(r["loop_ms"] / r["featgraph_ms"])
    assert rows[0]["grouped"] and not rows[-1]["grouped"]  # sixteen relations grouped; four wide ones not
    assert "| 16 relations | 16 |" in capsys.readouterr().out
