import json

import pytest

from featgraph.cli import main


def test_train_writes_metrics_saves_and_reloads(tmp_path, capsys):
    metrics, model = tmp_path / "m.json", tmp_path / "m.pt"
    main(["train", "--model", "gat", "--epochs", "3", "--quiet", "--json", str(metrics), "--save", str(model)])
    result = json.loads(metrics.read_text())
    assert {"val_acc", "test_acc", "epoch_seconds", "peak_rss_mb"} <= result.keys()
    assert "gat (featgraph) on cora" in capsys.readouterr().out
    main(["train", "--load", str(model), "--json", str(metrics)])
    assert json.loads(metrics.read_text())["test_acc"] == pytest.approx(result["test_acc"])


def test_demo_prints_featgraph_next_to_pyg(capsys):
    main(["demo", "--epochs", "3", "--models", "gcn"])
    out = capsys.readouterr().out
    assert "| gcn | featgraph |" in out
    if "not installed" not in out:
        assert "| gcn | pyg |" in out
