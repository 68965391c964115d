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


def test_bench_accuracy_minibatch_compares_full_graph_and_sampled_training(tmp_path, capsys):
    out = tmp_path / "m.json"
    args = ["--minibatch", "--models", "sage", "--datasets", "cora", "--seeds", "2", "--epochs", "2"]
    main(["bench", "accuracy", *args, "--fanout", "5,5", "--batch-size", "64", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "| cora | sage |" in printed and "fan-out 5,5, batch 64" in printed
    (row,) = json.loads(out.read_text())["rows"]
    assert set(row["accuracies"]) == {"full-graph", "mini-batch"}
    assert all(len(v) == 2 and all(0 <= a <= 1 for a in v) for v in row["accuracies"].values())


def test_bench_accuracy_precision_compares_float32_and_autocast_training(tmp_path, capsys):
    out = tmp_path / "p.json"
    args = ["--precision", "bf16", "--models", "gcn", "--datasets", "cora", "--seeds", "1", "--epochs", "3"]
    main(["bench", "accuracy", *args, "--json", str(out)])
    assert "| dataset | model | fp32 | bf16 | bf16 - fp32 (pp) | published |" in capsys.readouterr().out
    (row,) = json.loads(out.read_text())["rows"]
    assert set(row["accuracies"]) == {"fp32", "bf16"}
    with pytest.raises(ValueError, match="two comparisons"):
        main(["bench", "accuracy", "--precision", "bf16", "--minibatch"])
