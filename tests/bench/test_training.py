import json

import pytest

from featgraph.bench import training
from featgraph.cli import main


@pytest.mark.parametrize("bench_model", list(training.MODELS))
def test_run_one_trains_each_model(bench_model):
    row = training.run_one("rand100k-2.9M", 0.005, bench_model, "featgraph", 1)
    assert row.ms is not None and row.ms > 0 and row.note == ""
    assert row.peak_mb is None or row.peak_mb >= 0


def test_baselines_report_why_they_do_not_run():
    pytest.importorskip("torch_geometric")
    assert training.run_one("rand100k-2.9M", 0.005, "gat", "pyg", 1).ms > 0
    dgl_row = training.run_one("rand100k-2.9M", 0.005, "sage-max", "dgl", 1)
    assert dgl_row.ms is None and dgl_row.note


def test_bench_train_subcommand_runs_workers_and_writes_json(tmp_path, capsys):
    out = tmp_path / "t.json"
    args = ["bench", "train", "--graphs", "rand100k-2.9M", "--scale", "0.005", "--models", "gcn", "--repeat", "1"]
    main([*args, "--frameworks", "featgraph", "pyg", "--json", str(out)])
    assert "| rand100k-2.9M | gcn | featgraph |" in capsys.readouterr().out
    rows = json.loads(out.read_text())["rows"]
    assert [r["framework"] for r in rows] == ["featgraph", "pyg"] and rows[0]["ratio"] == 1.0


def test_compiled_rows_name_their_framework():
    row = training.run_one("rand100k-2.9M", 0.005, "gcn", "featgraph" + training.COMPILED, 1)
    assert row.framework == "featgraph-compiled" and row.ms is not None and row.ms > 0 and row.note == ""
    assert row.first_ms is not None and row.first_ms > 0  # the epoch that compiles
