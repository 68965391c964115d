import json

import pytest

from featgraph.cli import main

pytest.importorskip("torch_geometric")


def test_bench_rgcn_train_trains_every_framework_on_each_shape(tmp_path, capsys):
    out = tmp_path / "rgcn.json"
    main(["bench", "rgcn-train", "--shapes", "aifb", "--scale", "0.05", "--repeat", "1", "--fast-max-gb", "0.001",
          "--device", "cpu", "--json", str(out)])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["device"] == "cpu"
    rows = written["rows"]
    assert [r["framework"] for r in rows] == ["featgraph", "featgraph-dgl-api", "pyg", "pyg-fast", "dgl"]
    ours, dgl_api, pyg, fast, dgl = rows
    assert dgl_api["ms"] > 0 and dgl_api["peak_mb"] is not None
    assert ours["ratio"] == 1.0 and ours["ms"] > 0 and ours["peak_mb"] is not None
    assert pyg["ms"] > 0 and pyg["ratio"] == pytest.approx(pyg["ms"] / ours["ms"])
    assert fast["ms"] is None and fast["note"].startswith("skipped: its per-edge weight takes")
    assert dgl["ms"] is not None or dgl["note"] == "skipped: DGL is not installed"
    assert ours["nodes"] == 414 and ours["relations"] == 90
    printed = capsys.readouterr().out
    assert "| aifb-like-0.05 (414 nodes, 2904 edges, 90 relations) | featgraph |" in printed
    assert "; device: cpu" in printed


def test_the_compiled_row_is_featgraphs_model_under_fullgraph_compile():
    import torch

    from featgraph.bench.rgcn_training import _model
    from featgraph.datasets import entity_like

    data = entity_like("aifb", 0.02)
    model, graph = _model("featgraph-compiled", data, 1.0)
    eager, _ = _model("featgraph", data, 1.0)
    assert isinstance(model, torch._dynamo.eval_frame.OptimizedModule) and graph == (data.graph,)
    assert type(model._orig_mod) is type(eager) and model.dynamo_ctx.fullgraph


def test_a_row_that_runs_out_of_gpu_memory_says_so(monkeypatch):
    import torch

    from featgraph.bench import rgcn_training

    def out_of_memory(*args: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(rgcn_training, "epoch_ms", out_of_memory)
    row = rgcn_training.run_one("aifb", 0.02, "featgraph", 1, 1.0)
    assert row.ms is None and row.peak_mb is None and row.note == "out of GPU memory"


def test_rows_on_a_gpu_train_there_and_count_its_memory(cuda, tmp_path):
    import torch

    out = tmp_path / "rgcn.json"
    main(["bench", "rgcn-train", "--shapes", "aifb", "--scale", "0.05", "--repeat", "1", "--device", str(cuda),
          "--frameworks", "featgraph", "featgraph-dgl-api", "pyg", "dgl", "--json", str(out)])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["device"] == torch.cuda.get_device_name(cuda)
    rows = {r["framework"]: r for r in written["rows"]}
    for framework in ("featgraph", "featgraph-dgl-api", "pyg"):
        row = rows[framework]
        assert row["ms"] > 0 and row["peak_mb"] > 0, row["note"]
    assert rows["dgl"]["note"] == "not run on cuda: DGL's CPU build"
