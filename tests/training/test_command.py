import json

import pytest

from featgraph.cli import main


def test_train_writes_metrics_saves_and_reloads(tmp_path, capsys):
    metrics, model = tmp_path / "m.json", tmp_path / "m.pt"
    main(["train", "--model", "gat", "--epochs", "3", "--quiet", "--json", str(metrics), "--save", str(model)])
    result = json.loads(metrics.read_text())
    assert {"val_acc", "test_acc", "epoch_seconds", "peak_rss_mb"} <= result.keys()
    assert "gat (featgraph, fp32) on cora" in capsys.readouterr().out
    main(["train", "--load", str(model), "--json", str(metrics)])
    assert json.loads(metrics.read_text())["test_acc"] == pytest.approx(result["test_acc"])


def test_precision_flag_trains_under_autocast(tmp_path, capsys):
    metrics = tmp_path / "m.json"
    main(["train", "--model", "sage", "--epochs", "2", "--precision", "bf16", "--quiet", "--json", str(metrics)])
    assert "sage (featgraph, bf16) on cora" in capsys.readouterr().out
    assert 0 <= json.loads(metrics.read_text())["test_acc"] <= 1
    with pytest.raises(SystemExit):
        main(["train", "--precision", "fp8"])


def test_demo_prints_featgraph_next_to_pyg(capsys):
    main(["demo", "--epochs", "3", "--models", "gcn"])
    out = capsys.readouterr().out
    assert "| gcn | featgraph |" in out
    if "not installed" not in out:
        assert "| gcn | pyg |" in out
