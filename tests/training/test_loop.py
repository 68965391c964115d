import pytest
import torch
import torch.nn.functional as F

from featgraph.training import build, evaluate, fit, load_model, node_task, preset, save
from featgraph.training.loop import MixedPrecision, normalized_features, split_accuracies


@pytest.fixture(scope="module")
def cora():
    return node_task("cora")


def test_task_is_row_normalised_with_the_standard_split(cora):
    assert cora.x.shape == (2708, 1433) and cora.num_classes == 7
    torch.testing.assert_close(cora.x.sum(1)[cora.x.sum(1) > 0], torch.ones(int((cora.x.sum(1) > 0).sum())))
    assert (len(cora.train_idx), len(cora.val_idx), len(cora.test_idx)) == (140, 500, 1000)
    with pytest.raises(ValueError, match="no labels"):
        node_task("karate")


def test_task_to_moves_every_tensor_and_keeps_the_rest(cora):
    moved = cora.to("meta")  # the meta device stands in for a GPU
    tensors = ("x", "edge_index", "y", "train_idx", "val_idx", "test_idx")
    assert all(getattr(moved, name).device.type == "meta" for name in tensors)
    assert all(getattr(moved, name).shape == getattr(cora, name).shape for name in tensors)
    assert (moved.name, moved.num_classes) == (cora.name, cora.num_classes) and cora.x.device.type == "cpu"


def test_signed_features_are_not_row_normalised():
    """A row sum of signed features (products-like's) is no size: dividing by it would scale rows arbitrarily."""
    signed = torch.tensor([[2.0, -1.0], [3.0, 1.0]])
    assert normalized_features(signed) is signed
    counts = torch.tensor([[2.0, 2.0], [0.0, 0.0]])
    torch.testing.assert_close(normalized_features(counts), torch.tensor([[0.5, 0.5], [0.0, 0.0]]))
    logits = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert split_accuracies(logits, torch.tensor([0, 0, 0]), torch.tensor([0, 1]), torch.tensor([2])) == (0.5, 1.0)


def trained_like_pyg(model: str, task, epochs: int):
    """(featgraph's model, PyG's, their metrics) trained from PyG's initial weights with torch's dropout in both."""
    config = preset(model, epochs=epochs)
    torch.manual_seed(0)
    theirs, ours = build(model, task, config, "pyg"), build(model, task, config, "featgraph")
    ours.load_state_dict(theirs.state_dict())
    ours.drop = F.dropout
    ref, got = (fit(net, task, config, seed=1, progress=False) for net in (theirs, ours))
    return ours, theirs, got, ref


def test_same_initial_weights_and_dropout_masks_train_like_pyg(cora):
    """With PyG's initial weights and torch's dropout in both, the two trainings follow one trajectory."""
    pytest.importorskip("torch_geometric")
    ours, theirs, got, ref = trained_like_pyg("gcn", cora, epochs=30)
    assert got.best_epoch == ref.best_epoch and abs(got.test_acc - ref.test_acc) <= 0.002
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(cora.x, cora.edge_index), theirs(cora.x, cora.edge_index), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("model,published", [("gcn", 0.815), ("gat", 0.83)])
def test_reaches_the_published_accuracy_on_cora(cora, model, published):
    torch.manual_seed(0)
    config = preset(model)
    metrics = fit(build(model, cora, config, "featgraph"), cora, config, seed=0, progress=False)
    assert metrics.test_acc >= published - 0.02, metrics
    assert metrics.epoch_seconds > 0 and metrics.peak_rss_mb > 0 and metrics.epochs == 200


def test_bf16_autocast_training_reaches_the_float32_accuracy(cora, model="gcn"):
    """bf16 autocast forward, float32 weights and Adam: the float32 run's accuracy within two points."""
    config = preset(model, epochs=50)
    results = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        net = build(model, cora, config, "featgraph")
        results[precision] = fit(net, cora, config, seed=0, progress=False, precision=precision)
        assert all(p.dtype == torch.float32 for p in net.parameters())
    assert results["fp32"].test_acc > 0.75 and abs(results["bf16"].test_acc - results["fp32"].test_acc) <= 0.02, results


def test_fp16_scales_the_loss_and_bad_precisions_are_named(cora):
    assert MixedPrecision("fp16").scaler.is_enabled() and not MixedPrecision("bf16").scaler.is_enabled()
    config = preset("gcn", epochs=30)
    torch.manual_seed(0)
    assert fit(build("gcn", cora, config, "featgraph"), cora, config, progress=False, precision="fp16").test_acc > 0.7
    with pytest.raises(ValueError, match="precision must be one of"):
        MixedPrecision("fp8")


def test_save_and_load_give_the_same_accuracy(cora, tmp_path):
    torch.manual_seed(0)
    config = preset("sage", epochs=15, aggr="max")
    net = build("sage", cora, config, "featgraph")
    fit(net, cora, config, progress=False)
    save(tmp_path / "m.pt", net, cora, config, "featgraph")
    loaded, task, meta = load_model(tmp_path / "m.pt")
    assert meta["model"] == "sage" and meta["config"]["aggr"] == "max"
    assert evaluate(loaded, task) == evaluate(net, cora)


def test_typed_task_trains_rgcn_like_pyg_and_models_match_their_tasks():
    """The generated AIFB-shaped task: features, edges sorted by relation with their types, a validation fifth
    of the training nodes; with PyG's initial weights and the same dropout, featgraph's RGCN follows PyG's
    trajectory and both learn the planted labels (4 classes: chance is 0.25)."""
    pytest.importorskip("torch_geometric")
    task = node_task("aifb-like-0.5")
    assert task.num_relations == 90 and task.edge_type.shape == (task.edge_index.shape[1],)
    assert bool((task.edge_type[1:] >= task.edge_type[:-1]).all())
    assert len(task.train_idx) + len(task.val_idx) == round(0.1 * task.x.shape[0]) // 2
    assert len(task.val_idx) == (len(task.train_idx) + len(task.val_idx)) // 5
    assert not set(task.val_idx.tolist()) & set(task.train_idx.tolist())
    _, _, got, ref = trained_like_pyg("rgcn", task, epochs=60)
    assert got.best_epoch == ref.best_epoch and abs(got.test_acc - ref.test_acc) <= 0.01
    assert got.test_acc > 0.5, got
    with pytest.raises(ValueError, match="model 'rgcn' reads edge types"):
        build("rgcn", node_task("cora"), preset("rgcn"), "featgraph")
    with pytest.raises(ValueError, match="dataset 'aifb-like-0.5' is typed"):
        build("gcn", task, preset("gcn"), "featgraph")
    with pytest.raises(ValueError, match="the scale after 'am-like-' must be a number"):
        node_task("am-like-0.1.2")


@pytest.mark.parametrize("model", ["rgat", "hgt"])
def test_typed_task_trains_rgat_and_hgt_like_pyg(model):
    """From PyG's initial weights with the same dropout, featgraph's RGAT (its cardinality-preserving mod) and
    HGT follow PyG's trajectory and compute PyG's logits (a few epochs: PyG's HGT takes seconds an epoch
    here); alone, featgraph's learns the planted labels (4 classes: chance is 0.25)."""
    pytest.importorskip("torch_geometric")
    task = node_task("aifb-like-0.2")
    ours, theirs, got, ref = trained_like_pyg(model, task, epochs=6)
    assert got.best_epoch == ref.best_epoch and abs(got.test_acc - ref.test_acc) <= 0.02, (got, ref)
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(task.x, *task.graph), theirs(task.x, *task.graph), rtol=1e-3, atol=1e-3)
    task = node_task("aifb-like-0.5")
    config = preset(model, epochs=80)
    torch.manual_seed(0)
    assert fit(build(model, task, config, "featgraph"), task, config, seed=0, progress=False).test_acc > 0.4
    with pytest.raises(ValueError, match=f"model '{model}' reads edge types"):
        build(model, node_task("cora"), preset(model), "featgraph")
