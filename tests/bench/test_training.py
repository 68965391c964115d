import json
import warnings

import pytest

from featgraph.bench import training
from featgraph.cli import main

FRAMEWORKS = ("featgraph", "pyg")


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


def test_bf16_rows_train_under_autocast_against_float32_in_the_same_run(tmp_path):
    out = tmp_path / "t.json"
    args = ["bench", "train", "--graphs", "rand100k-2.9M", "--scale", "0.005", "--models", "sage-mean", "--repeat", "1"]
    main([*args, "--frameworks", "featgraph", "--bf16", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["framework"] for r in rows] == ["featgraph", "featgraph-bf16"]
    assert rows[1]["ms"] > 0 and rows[1]["note"] == "" and rows[1]["ratio"] == rows[1]["ms"] / rows[0]["ms"]


@pytest.mark.parametrize("bench_model", training.LAYER_MODELS)
def test_run_one_trains_each_layer_model_fused(bench_model):
    """Each of PyG's newer layers trains with featgraph's layer on its fused path (no FallbackWarning)."""
    pytest.importorskip("torch_geometric")
    from featgraph.nn import FallbackWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = training.run_one("rand100k-2.9M", 0.002, bench_model, "featgraph", 1)
    assert ours.ms is not None and ours.ms > 0 and ours.note == ""


def test_layer_model_baselines_run_or_say_why_not():
    pytest.importorskip("torch_geometric")
    assert training.run_one("rand100k-2.9M", 0.002, "gine", "pyg", 1).ms > 0
    assert training.run_one("rand100k-2.9M", 0.002, "gine", "pyg-csr", 1).note.startswith("n/a")


def test_layer_models_compute_the_same_function_in_each_framework():
    """featgraph's LayerNet given PyG's LayerNet's parameters gives its outputs, for every layer model."""
    pytest.importorskip("torch_geometric")
    import torch
    import torch_geometric.nn as pyg_nn

    import featgraph.nn as fgnn

    g = training.GRAPHS["rand100k-2.9M"](0.002)
    x = torch.randn(g.num_nodes, training.IN_FEATURES)
    edge_attr = torch.randn(g.num_edges, training.EDGE_DIM)
    for bench_model in training.LAYER_MODELS:
        theirs = training.LayerNet(pyg_nn, bench_model, edge_attr)
        ours = training.LayerNet(fgnn, bench_model, edge_attr)
        ours.load_state_dict(theirs.state_dict())
        expected = theirs(x, torch.stack(g.coo()))
        torch.testing.assert_close(ours(x, g), expected, rtol=1e-4, atol=1e-4, msg=bench_model)


def test_rows_on_a_gpu_train_there_and_count_its_memory(cuda):
    pytest.importorskip("torch_geometric")
    for bench_model in ("gcn", "gat"):
        ours, theirs = (training.run_one("rand100k-2.9M", 0.05, bench_model, f, 1, str(cuda)) for f in FRAMEWORKS)
        for row in (ours, theirs):
            assert row.ms is not None and row.ms > 0 and row.peak_mb > 0, row.note
    assert training.run_one("rand100k-2.9M", 0.05, "gcn", "dgl", 1, str(cuda)).note.startswith("not run on cuda")


def test_torch_dropout_rows_run_featgraphs_layers_with_torchs_dropout(tmp_path):
    import torch.nn.functional as F

    from featgraph.ops import dropout

    g = training.GRAPHS["rand100k-2.9M"](0.002)
    assert training._setups(g, "gat", ["featgraph"], "torch")["featgraph"][0].drop is F.dropout
    assert training._setups(g, "gat", ["featgraph"])["featgraph"][0].drop is dropout
    assert training._setups(g, "gine", ["featgraph"], "torch") == {"featgraph": "n/a: this model has no dropout"}
    out = tmp_path / "t.json"
    args = ["bench", "train", "--graphs", "rand100k-2.9M", "--scale", "0.005", "--models", "gcn", "--repeat", "1"]
    main([*args, "--frameworks", "featgraph", "--torch-dropout", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["framework"] for r in rows] == ["featgraph", "featgraph-torch-dropout"]
    assert rows[1]["ms"] > 0 and rows[1]["ratio"] == rows[1]["ms"] / rows[0]["ms"]
