import argparse
import json

import pytest
import torch

from featgraph.cli import main
from featgraph.cli.train import add_demo_arguments, demo


def test_train_writes_metrics_saves_and_reloads(tmp_path, capsys):
    metrics, model = tmp_path / "m.json", tmp_path / "m.pt"
    main(["train", "--model", "gat", "--epochs", "3", "--quiet", "--json", str(metrics), "--save", str(model)])
    result = json.loads(metrics.read_text())
    assert {"val_acc", "test_acc", "epoch_seconds", "peak_rss_mb"} <= result.keys()
    assert "gat (featgraph, fp32, cpu) on cora" in capsys.readouterr().out
    main(["train", "--load", str(model), "--json", str(metrics)])
    assert json.loads(metrics.read_text())["test_acc"] == pytest.approx(result["test_acc"])


@pytest.mark.parametrize("model", ["rgcn", "rgat", "hgt"])
def test_relational_models_train_on_a_typed_dataset_and_are_refused_elsewhere(tmp_path, capsys, model):
    pytest.importorskip("torch_geometric")
    metrics = tmp_path / "m.json"
    argv = ["train", "--model", model, "--dataset", "mutag-like-0.1", "--epochs", "3", "--quiet"]
    main([*argv, "--json", str(metrics)])
    assert f"{model} (featgraph, fp32, cpu) on mutag-like-0.1" in capsys.readouterr().out
    assert 0 <= json.loads(metrics.read_text())["test_acc"] <= 1
    with pytest.raises(ValueError, match=f"--model {model} trains full-graph"):
        main(["train", "--model", model, "--dataset", "aifb-like", "--minibatch"])
    with pytest.raises(ValueError, match=f"model '{model}' reads edge types"):
        main(["train", "--model", model, "--epochs", "1", "--quiet"])


def test_precision_flag_trains_under_autocast(tmp_path, capsys):
    metrics = tmp_path / "m.json"
    main(["train", "--model", "sage", "--epochs", "2", "--precision", "bf16", "--quiet", "--json", str(metrics)])
    assert "sage (featgraph, bf16, cpu) on cora" in capsys.readouterr().out
    assert 0 <= json.loads(metrics.read_text())["test_acc"] <= 1
    with pytest.raises(SystemExit):
        main(["train", "--precision", "fp8"])


def test_demo_attributes_layers_and_dropout_separately(capsys):
    """Four rows from the same weights: PyG's layers and dropout, featgraph's layers with torch's dropout (the
    same masks, so the same trajectory), PyG's layers with featgraph's dropout, and both featgraph's; each
    row's ratio to the first."""
    pytest.importorskip("torch_geometric")
    parser = argparse.ArgumentParser()
    add_demo_arguments(parser)
    rows = demo(parser.parse_args(["--epochs", "3", "--models", "gcn"]))
    out = capsys.readouterr().out
    assert [(layers, dropout) for _, layers, dropout, _ in rows] == [
        ("pyg", "torch"), ("featgraph", "torch"), ("pyg", "featgraph"), ("featgraph", "featgraph"),
    ]  # fmt: skip
    metrics = [m for *_, m in rows]
    assert abs(metrics[0].val_acc - metrics[1].val_acc) <= 0.01  # torch's masks from the same seed
    assert abs(metrics[2].val_acc - metrics[3].val_acc) <= 0.01  # featgraph's masks from the same seed
    for m in metrics:
        assert f"| {m.epoch_seconds * 1e3:.2f} | {metrics[0].epoch_seconds / m.epoch_seconds:.2f}x |" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device", "mps"], "--device must be cpu or cuda"),
        (["--device", "nonsense:x"], "--device 'nonsense:x' is not a device"),
        (["--device", "cuda:64"], "--device 'cuda:64'"),
    ],
)
def test_device_flag_refuses_what_torch_cannot_reach(argv, message):
    with pytest.raises(ValueError, match=message):
        main(["train", "--epochs", "1", "--quiet", *argv])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_cuda_device_without_a_gpu_is_refused_by_name():
    with pytest.raises(ValueError, match="--device 'cuda': torch sees no CUDA GPU"):
        main(["train", "--epochs", "1", "--quiet", "--device", "cuda"])
    with pytest.raises(ValueError, match="--device 'cuda'"):
        main(["demo", "--epochs", "1", "--device", "cuda"])


def test_training_on_the_gpu_reaches_the_cpu_accuracy(cuda, tmp_path):
    """Full-graph training on a CUDA device (the Triton kernels), the same seed and hashed dropout masks as on
    the CPU: the same accuracy within a few test vertices (float32 sums in another order)."""
    results = {}
    for device in ("cpu", str(cuda)):
        path = tmp_path / f"{device}.json"
        main(["train", "--model", "gcn", "--epochs", "60", "--quiet", "--device", device, "--json", str(path)])
        results[device] = json.loads(path.read_text())
    assert results[str(cuda)]["test_acc"] == pytest.approx(results["cpu"]["test_acc"], abs=0.02)


def test_link_task_trains_full_graph_and_mini_batch(tmp_path, capsys):
    metrics = tmp_path / "m.json"
    main(["train", "--task", "link", "--epochs", "2", "--hidden", "16", "--quiet", "--json", str(metrics)])
    out = capsys.readouterr().out
    assert "sage link (featgraph, dot decoder, full-graph) on cora: val AUC" in out
    result = json.loads(metrics.read_text())
    assert {"val_auc", "test_auc", "test_hits", "test_mrr", "epoch_seconds", "peak_rss_mb"} <= result.keys()
    assert f"Hits@50 {result['test_hits']:.4f} MRR {result['test_mrr']:.4f}" in out
    argv = ["train", "--task", "link", "--minibatch", "--fanout", "5,5", "--batch-size", "2048", "--epochs", "1"]
    main([*argv, "--hidden", "16", "--decoder", "mlp", "--quiet"])
    assert "(featgraph, mlp decoder, mini-batch, fan-out 5,5, batch 2048) on cora" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "gcn"], "--model is not supported with --task link"),
        (["--precision", "bf16"], "--precision is not supported with --task link"),
        (["--save", "m.pt"], "--save is not supported with --task link"),
        (["--aggr", "max"], "--aggr is not supported with --task link"),
        (["--fanout", "5"], "--fanout and --batch-size apply to --minibatch"),
        (["--dataset", "karate"], "--task link trains on cora, citeseer, products-like-small"),
    ],
)
def test_link_task_refuses_what_it_does_not_take_by_name(argv, message):
    with pytest.raises(ValueError, match=message):
        main(["train", "--task", "link", "--epochs", "1", "--quiet", *argv])


def test_decoder_without_the_link_task_is_refused():
    with pytest.raises(ValueError, match="--decoder applies to --task link"):
        main(["train", "--decoder", "mlp", "--epochs", "1", "--quiet"])
    with pytest.raises(SystemExit):
        main(["train", "--task", "graph"])
