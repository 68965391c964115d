import json

import pytest
import torch

from featgraph.cli import main
from featgraph.loader import BlockLoader
from featgraph.training import minibatch, preset
from featgraph.training.loop import labelled_dataset, normalized_features


@pytest.fixture(scope="module")
def cora():
    return labelled_dataset("cora")


def test_one_epoch_end_to_end_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "m.json"
    args = ["train", "--minibatch", "--fanout", "10,5", "--batch-size", "64", "--epochs", "1", "--quiet"]
    main([*args, "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["epochs"] == 1 and result["batches_per_epoch"] == 3  # 140 training vertices
    assert result["epoch_seconds"] > 0 and result["inference_seconds"] > 0 and result["peak_rss_mb"] > 0
    assert 0 <= result["test_acc"] <= 1
    assert "sage (featgraph, fp32, cpu, mini-batch, fan-out 10,5, batch 64) on cora" in capsys.readouterr().out


def test_accuracy_well_above_chance_after_a_few_epochs(cora):
    config = preset("sage", epochs=6)
    torch.manual_seed(0)
    net = minibatch.SampledClassifier("sage", cora.features.shape[1], cora.num_classes, 2, config, "featgraph")
    metrics = minibatch.fit(net, cora, [10, 10], 16, config, seed=0, progress=False)
    assert metrics.test_acc >= 0.65, metrics  # chance: 1/7; the largest class: 0.32 of the test vertices
    assert metrics.batches_per_epoch == 9 and metrics.epochs == 6


def test_bf16_autocast_training_learns_as_float32_does(cora):
    config = preset("sage", epochs=6)
    accuracies = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        net = minibatch.SampledClassifier("sage", cora.features.shape[1], cora.num_classes, 2, config, "featgraph")
        accuracies[precision] = minibatch.fit(net, cora, [10, 10], 16, config, 0, False, precision=precision).test_acc
        assert all(p.dtype == torch.float32 for p in net.parameters())
    assert abs(accuracies["bf16"] - accuracies["fp32"]) <= 0.03, accuracies


def test_default_hyper_parameters_learn_a_large_graph(tmp_path):
    """The full-graph presets (lr 0.01, weight decay 5e-4) diverged on products-like: 1.5% test accuracy, below
    the largest class's 22%."""
    assert minibatch.minibatch_preset("sage").lr == 0.003 and minibatch.minibatch_preset("sage", lr=0.1).lr == 0.1
    out = tmp_path / "m.json"
    main(["train", "--minibatch", "--dataset", "products-like-small", "--epochs", "5", "--quiet", "--json", str(out)])
    assert json.loads(out.read_text())["test_acc"] >= 0.35


@pytest.mark.parametrize("model", minibatch.MODELS)
def test_featgraph_and_pyg_layers_agree_on_blocks_and_on_the_full_graph(cora, model):
    """Same weights: the same logits on a sampled batch's blocks; layer-wise inference equals PyG's layers run
    over the whole graph's edge_index (the full-neighbourhood forward)."""
    pytest.importorskip("torch_geometric")
    config = preset(model)
    x = normalized_features(cora.features)
    torch.manual_seed(0)
    theirs = minibatch.SampledClassifier(model, x.shape[1], cora.num_classes, 2, config, "pyg").eval()
    ours = minibatch.SampledClassifier(model, x.shape[1], cora.num_classes, 2, config, "featgraph").eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    batch = next(iter(BlockLoader(cora.graph, [10, 5], 64, seed=0, x=x, prefetch=0)))
    with torch.no_grad():
        torch.testing.assert_close(ours(batch.x, batch.blocks), theirs(batch.x, batch.blocks), rtol=1e-4, atol=1e-5)
        edge_index, h = cora.edge_index, x
        for depth, conv in enumerate(theirs.convs):
            h = conv(h, edge_index)
            h = h if depth == len(theirs.convs) - 1 else theirs.activation(h)
        torch.testing.assert_close(ours.inference(cora.graph, x), h, rtol=1e-4, atol=1e-4)


def test_one_layer_per_fanout_and_pyg_dropout_for_pyg_layers(cora):
    config = preset("gat")
    net = minibatch.SampledClassifier("gat", 1433, 7, 3, config, "featgraph")
    assert len(net.convs) == 3 and net.convs[0].heads == config.heads and net.convs[-1].heads == 1
    assert net.loops_blocks  # GATConv adds self loops: the loader should bring each block's looped graph
    assert not minibatch.SampledClassifier("sage", 1433, 7, 2, preset("sage"), "featgraph").loops_blocks
    assert not minibatch.SampledClassifier("gat", 1433, 7, 2, config, "pyg").loops_blocks
    with pytest.raises(ValueError, match="expected one block per layer"):
        batch = next(iter(BlockLoader(cora.graph, [5, 5], 16, seed=0, x=cora.features, prefetch=0)))
        net(batch.x, batch.blocks)


@pytest.mark.parametrize(
    "args,named",
    [
        (["--fanout", "15,0"], "--fanout"),
        (["--fanout", "15,-2"], "--fanout"),
        (["--fanout", "15,ten"], "--fanout"),
        (["--fanout", ""], "--fanout"),
        (["--batch-size", "0"], "--batch-size"),
        (["--batch-size", "1.5"], "--batch-size"),
    ],
)
def test_bad_arguments_are_named(args, named, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--minibatch", "--quiet", *args])
    assert f"argument {named}" in capsys.readouterr().err


def test_models_without_bipartite_layers_and_misplaced_options_are_refused():
    with pytest.raises(ValueError, match="model must be one of .*mini-batch"):
        main(["train", "--minibatch", "--model", "gcn", "--quiet"])
    with pytest.raises(ValueError, match="--fanout and --batch-size apply to --minibatch"):
        main(["train", "--fanout", "5,5", "--quiet"])
    with pytest.raises(ValueError, match="--save and --load are for full-graph training"):
        main(["train", "--minibatch", "--save", "model.pt", "--quiet"])
    with pytest.raises(ValueError, match="num_layers must be an int >= 1"):
        minibatch.SampledClassifier("sage", 4, 2, 0, preset("sage"), "featgraph")


def test_select_on_validation_keeps_the_best_validation_epoch(cora):
    """The kept weights score the best validation accuracy seen, at least the last epoch's."""
    config = preset("sage", epochs=4)
    torch.manual_seed(0)
    net = minibatch.SampledClassifier("sage", cora.features.shape[1], cora.num_classes, 2, config, "featgraph")
    seen = []
    inference = net.inference

    def recording(graph, x, progress=False, storage_dtype=None):
        logits = inference(graph, x, progress, storage_dtype)
        seen.append(float((logits.argmax(1)[cora.val_idx] == cora.labels[cora.val_idx]).float().mean()))
        return logits

    net.inference = recording
    metrics = minibatch.fit(net, cora, [5, 5], 64, config, seed=0, progress=False, select_on_validation=True)
    assert len(seen) == config.epochs + 1  # one per epoch, then the final evaluation of the kept weights
    assert metrics.val_acc == max(seen[:-1]) == seen[-1]


def test_bfloat16_evaluation_storage_rounds_only_the_hidden_rows(cora, tmp_path):
    """The same trained weights evaluated with float32 and bfloat16 hidden rows: float32 logits, close, nearly
    every prediction the same; the command line takes the choice."""
    config = preset("sage", epochs=3)
    torch.manual_seed(0)
    net = minibatch.SampledClassifier("sage", cora.features.shape[1], cora.num_classes, 2, config, "featgraph")
    minibatch.fit(net, cora, [5, 5], 64, config, seed=0, progress=False)
    x = normalized_features(cora.features)
    exact = net.inference(cora.graph, x)
    rounded = net.inference(cora.graph, x, storage_dtype=torch.bfloat16)
    assert rounded.dtype == torch.float32 and not torch.equal(rounded, exact)
    torch.testing.assert_close(rounded, exact, rtol=0.02, atol=0.02)
    assert (rounded.argmax(1) == exact.argmax(1)).float().mean() > 0.98
    out = tmp_path / "m.json"
    args = ["train", "--minibatch", "--fanout", "5,5", "--batch-size", "64", "--epochs", "1", "--quiet"]
    main([*args, "--eval-storage", "bfloat16", "--json", str(out)])
    assert 0 <= json.loads(out.read_text())["test_acc"] <= 1


def test_minibatch_training_on_the_gpu_reaches_the_cpu_accuracy(tmp_path, cuda):
    """Batches sampled on the CPU, pinned, copied to the GPU; the evaluation's blocks likewise."""
    results = {}
    for device in ("cpu", str(cuda)):
        path = tmp_path / f"{device}.json"
        args = ["train", "--minibatch", "--fanout", "10,5", "--batch-size", "64", "--epochs", "4", "--quiet"]
        main([*args, "--device", device, "--json", str(path)])
        results[device] = json.loads(path.read_text())
    assert results[str(cuda)]["test_acc"] == pytest.approx(results["cpu"]["test_acc"], abs=0.03)
