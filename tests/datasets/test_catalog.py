import pytest
import torch

from featgraph import datasets

REAL = [info for info in datasets.available() if not info.source.startswith("synthetic")]


@pytest.mark.parametrize("info", REAL, ids=lambda i: i.name)
def test_each_bundled_dataset_loads_with_the_listed_size(info):
    data = datasets.load(info.name, feature_dim=16)
    assert data.graph.num_nodes == info.num_nodes
    assert data.graph.num_edges == info.num_edges
    assert data.features.shape == (info.num_nodes, info.num_features or 16)
    assert data.features.dtype == torch.float32
    assert data.edge_index.shape == (2, info.num_edges)


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_split_and_labels(name):
    data = datasets.load(name)
    classes = data.num_classes
    assert torch.equal(data.train_idx, torch.arange(20 * classes))
    assert data.val_idx.numel() == 500 and data.test_idx.numel() == 1000
    assert int(data.labels.max()) == classes - 1
    # standard split: 20 training nodes per class
    assert torch.equal(torch.bincount(data.labels[data.train_idx], minlength=classes), torch.full((classes,), 20))
    # symmetric, no self loops, no duplicates (as PyG's Planetoid)
    src, dst = data.graph.coo()
    pairs = set(zip(src.tolist(), dst.tolist(), strict=True))
    assert len(pairs) == data.graph.num_edges
    assert all((d, s) in pairs for s, d in pairs)
    assert not bool((src == dst).any())
    assert set(data.features.unique().tolist()) <= {0.0, 1.0}  # raw bag of words


def test_random_features_are_seeded():
    a = datasets.load("karate", feature_dim=8, seed=3).features
    assert torch.equal(a, datasets.load("karate", feature_dim=8, seed=3).features)
    assert not torch.equal(a, datasets.load("karate", feature_dim=8, seed=4).features)


def test_unknown_dataset_lists_what_is_available():
    with pytest.raises(KeyError, match="available: cora, citeseer"):
        datasets.load("ogbn-products")


def test_describe_lists_every_dataset():
    text = datasets.describe()
    assert all(info.name in text for info in datasets.available())
