import json

import pytest

from featgraph.bench import minibatch
from featgraph.cli import main
from featgraph.graph.interop import import_dgl


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory):
    path, described = minibatch.write_graph(0.002, tmp_path_factory.mktemp("minibatch"))
    assert "products-like-0.002" in described
    return str(path)


@pytest.mark.parametrize(
    "bench_model,framework", [("sage", "featgraph"), ("gat", "featgraph"), ("gat", "featgraph-pyg")]
)
def test_featgraph_loader_rows_measure_sampling_training_format_and_memory(graph_file, bench_model, framework):
    if framework == "featgraph-pyg":
        pytest.importorskip("torch_geometric")
    row = minibatch.run_one(graph_file, bench_model, framework, 1, 1)
    assert row.note == "" and row.sample_seeds_s > 0 and row.train_seeds_s > 0
    assert row.format_share >= 0 and (row.peak_mb is None or row.peak_mb >= 0)


def test_missing_baselines_are_rows_saying_why(graph_file):
    if import_dgl() is None:
        assert minibatch.run_one(graph_file, "sage", "dgl", 1, 1).note == "DGL does not import here"
    pyg = minibatch.run_one(graph_file, "sage", "pyg", 1, 1)
    assert pyg.note or pyg.train_seeds_s > 0


def test_bench_minibatch_prints_one_row_per_framework(tmp_path, capsys):
    out = tmp_path / "m.json"
    frameworks = ["featgraph", "dgl", "pyg"]
    args = ["bench", "minibatch", "--scale", "0.002", "--models", "gat", "--batches", "1", "--warmup", "0"]
    main([*args, "--frameworks", *frameworks, "--clock", "cpu", "--json", str(out)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(frameworks)
    assert {line.count("|") for line in table} == {10}
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert report["clock"] == "cpu"
    assert [(r["model"], r["framework"]) for r in rows] == [("gat", framework) for framework in frameworks]
    for r in rows:
        assert (r["train_seeds_s"] is not None) != bool(r["note"]), r
        assert (r["train_vs_dgl"] is not None) == (r["train_seeds_s"] is not None and import_dgl() is not None)
