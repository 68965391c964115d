import json

import pytest

from featgraph.cli import main


def test_bench_accuracy_reports_both_frameworks_per_seed(tmp_path, capsys):
    pytest.importorskip("torch_geometric")
    out = tmp_path / "a.json"
    args = ["--models", "gcn", "--datasets", "cora", "--seeds", "2", "--epochs", "5", "--json", str(out)]
    main(["bench", "accuracy", *args])
    assert "| cora | gcn |" in capsys.readouterr().out
    (row,) = json.loads(out.read_text())["rows"]
    assert row["published"] == 0.815
    assert all(len(v) == 2 and all(0 <= a <= 1 for a in v) for v in row["accuracies"].values())
