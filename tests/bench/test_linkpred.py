import json

import pytest
import torch

from featgraph.bench import linkpred
from featgraph.cli import main
from featgraph.graph.interop import import_dgl


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    path, described = linkpred.write_task(0.002, tmp_path_factory.mktemp("linkpred"))
    assert "products-like-0.002" in described and "training positives" in described
    return str(path)


def test_task_file_puts_the_training_positives_first_in_the_message_graph(task_file):
    raw = torch.load(task_file, weights_only=True)
    count = raw["train"].shape[1]
    assert torch.equal(torch.stack([raw["src"][:count], raw["dst"][:count]]), raw["train"])
    assert torch.equal(torch.stack([raw["dst"][count : 2 * count], raw["src"][count : 2 * count]]), raw["train"])


@pytest.mark.parametrize(
    ("framework", "negatives"),
    [
        ("featgraph", "triplet"),
        ("featgraph", "binary"),
        ("featgraph-blocks", "triplet"),
        ("featgraph-floor", "triplet"),
        ("featgraph-pyg", "triplet"),
        ("dgl", "triplet"),
    ],  # fmt: skip
)
def test_rows_measure_sampling_and_training_edges_per_second(task_file, framework, negatives):
    if framework == "featgraph-pyg":
        pytest.importorskip("torch_geometric")
    row = linkpred.run_one(task_file, framework, [5, 5], negatives, 1, 1, "cpu")
    if framework == "dgl" and import_dgl() is None:
        assert row.note == "DGL does not import here" and row.train_edges_s is None
        return
    assert row.note == "" and row.sample_edges_s > 0 and row.train_edges_s > 0
    assert row.peak_mb is None or row.peak_mb >= 0
    assert 0 <= row.wait_share <= 1


def test_rows_on_a_gpu_sample_on_the_cpu_and_train_there(task_file, cuda):
    frameworks = ["featgraph", "featgraph-blocks"]
    frameworks += ["featgraph-pyg"] if linkpred.unavailable("featgraph-pyg") == "" else []
    for framework in frameworks:
        row = linkpred.run_one(task_file, framework, [5, 5], "triplet", 2, 1, "wall", str(cuda))
        assert row.note == "" and row.sample_edges_s > 0 and row.train_edges_s > 0, row
        assert 0 <= row.wait_share <= 1 and row.peak_mb > 0


def test_bench_linkpred_prints_rows_with_ratios_to_featgraph(tmp_path, capsys):
    out = tmp_path / "l.json"
    argv = ["bench", "linkpred", "--scale", "0.002", "--fanout", "5,5", "--batches", "1", "--warmup", "0"]
    main([*argv, "--frameworks", "featgraph", "dgl", "--device", "cpu", "--json", str(out)])
    printed = capsys.readouterr().out
    table = [line for line in printed.splitlines() if line.startswith("|")]
    assert len(table) == 4 and {line.count("|") for line in table} == {9} and "wait share" in table[0]
    report = json.loads(out.read_text())
    assert report["fanout"] == [5, 5] and report["negatives"] == "triplet"
    assert report["device"] == "cpu" and "device: cpu" in printed
    ours, dgl = report["rows"]
    assert ours["framework"] == "featgraph" and ours["train_vs_featgraph"] == 1.0
    assert 0 <= ours["wait_share"] <= 1
    assert (dgl["train_vs_featgraph"] is not None) == (import_dgl() is not None)
    with pytest.raises(SystemExit):
        main(["bench", "linkpred", "--fanout", "0,5"])


def test_the_dense_floor_keeps_every_product_and_drops_the_aggregations(task_file, monkeypatch):
    """The floor's stand-in gives each layer its destinations' own rows, so the layer's products keep their
    shapes; the verdict compares the floor's rate with twice DGL's."""
    from featgraph.graph import Graph

    g = Graph(torch.tensor([0, 1, 2]), torch.tensor([0, 0, 1]), (4, 2))
    rows = torch.randn(4, 3)
    assert torch.equal(linkpred._destination_rows(g, "copy_lhs", "mean", rows, None), rows[:2])
    dgl, floor = linkpred.Row("dgl", train_edges_s=100.0), linkpred.Row("featgraph-floor", train_edges_s=150.0)
    assert linkpred.floor_verdict([dgl, floor], 2.0).endswith("out of reach")
    assert linkpred.floor_verdict([dgl, floor], 1.5).endswith("within reach")
    assert linkpred.floor_verdict([floor], 2.0) is None
