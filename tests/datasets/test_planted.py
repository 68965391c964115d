import pytest
import torch

from featgraph.datasets.planted import (
    ENTITY_FEATURES,
    ENTITY_SHAPES,
    MAG_CLASSES,
    MAG_EDGES,
    MAG_FEATURES,
    MAG_NODES,
    MAG_SPLIT,
    PRODUCTS_CLASSES,
    PRODUCTS_EDGES,
    PRODUCTS_FEATURES,
    PRODUCTS_NODES,
    entity_like,
    mag_like,
    products_like,
)


@pytest.fixture(scope="module")
def small():
    return products_like(0.005, seed=3)


def nearest_centroid_accuracy(features: torch.Tensor, labels: torch.Tensor, train: torch.Tensor, test: torch.Tensor):
    centroids = torch.stack([features[train][labels[train] == c].mean(0) for c in range(PRODUCTS_CLASSES)])
    guess = torch.cdist(features[test], centroids).argmin(1)
    return (guess == labels[test]).float().mean().item()


def test_shape_follows_products_at_scale(small):
    g = small.graph
    assert g.num_nodes == round(PRODUCTS_NODES * 0.005)
    assert abs(g.num_edges - PRODUCTS_EDGES * 0.005) <= 2
    assert small.features.shape == (g.num_nodes, PRODUCTS_FEATURES) and small.num_classes == PRODUCTS_CLASSES
    assert torch.equal(torch.bincount(small.labels, minlength=PRODUCTS_CLASSES) > 0, torch.ones(47, dtype=torch.bool))
    src, dst = g.coo()
    forward = torch.sort(src * g.num_nodes + dst).values
    assert torch.equal(forward, torch.sort(dst * g.num_nodes + src).values)  # every edge in both directions
    degrees = g.in_degrees().float()
    assert degrees.max() > 10 * degrees.mean()  # a power-law tail, not a uniform graph


def test_split_is_disjoint_and_covers_every_vertex(small):
    parts = torch.cat([small.train_idx, small.val_idx, small.test_idx])
    assert torch.equal(torch.sort(parts).values, torch.arange(small.graph.num_nodes))
    n = small.graph.num_nodes
    assert small.train_idx.numel() == round(0.08 * n) and small.val_idx.numel() == round(0.016 * n)


def test_labels_are_planted_where_neighbours_reveal_them(small):
    src, dst = small.graph.coo()
    assert abs((small.labels[src] == small.labels[dst]).float().mean().item() - 0.8) < 0.05
    x, y = small.features, small.labels
    n = small.graph.num_nodes
    summed = torch.zeros_like(x).index_add_(0, dst, x[src])
    aggregated = x + summed / small.graph.in_degrees().clamp(min=1).unsqueeze(1)
    alone = nearest_centroid_accuracy(x, y, small.train_idx, small.test_idx)
    with_neighbours = nearest_centroid_accuracy(aggregated, y, small.train_idx, small.test_idx)
    assert 1 / PRODUCTS_CLASSES * 3 < alone < with_neighbours - 0.1, (alone, with_neighbours, n)


def test_same_seed_same_dataset():
    a, b, c = products_like(0.001, seed=1), products_like(0.001, seed=1), products_like(0.001, seed=2)
    assert torch.equal(torch.stack(a.graph.coo()), torch.stack(b.graph.coo())) and torch.equal(a.features, b.features)
    assert not torch.equal(a.labels, c.labels)


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"scale": 0}, "scale"), ({"scale": 2}, "scale"), ({"homophily": 1.5}, "homophily")]
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        products_like(**kwargs)


@pytest.mark.parametrize("shape", sorted(ENTITY_SHAPES))
def test_entity_graphs_follow_the_rgcn_datasets_shapes(shape):
    nodes, edges, relations, classes = ENTITY_SHAPES[shape]
    scale = 0.01 if shape in ("bgs", "am") else 0.2
    data = entity_like(shape, scale, seed=1)
    hg = data.graph
    assert hg.num_nodes == round(nodes * scale) and hg.num_edges == round(edges * scale)
    assert hg.num_relations == relations and data.num_classes == classes
    sizes = torch.bincount(hg.etype, minlength=relations)
    assert sizes.min() >= 1 and sizes[0] > sizes[relations // 2] > 0  # a few large relations, many small ones
    assert data.x.shape == (hg.num_nodes, ENTITY_FEATURES) and set(data.y.unique().tolist()) == set(range(classes))
    split = torch.cat([data.train_idx, data.test_idx])
    assert split.unique().numel() == split.numel() == round(0.1 * hg.num_nodes)


def test_entity_labels_are_found_through_relations_not_features():
    """Reading which relation brings which class of in-neighbour names a node's class; the features alone
    are a far weaker guess."""
    data = entity_like("aifb", 1.0, seed=2)
    src, dst = data.graph.graph.edge_index
    classes = data.num_classes
    votes = torch.zeros(data.graph.num_nodes, classes)
    votes.index_put_((dst, (data.y[src] - data.graph.etype) % classes), torch.ones(dst.numel()), accumulate=True)
    test = data.test_idx
    by_relations = (votes[test].argmax(1) == data.y[test]).float().mean().item()
    centroids = torch.stack([data.x[data.train_idx][data.y[data.train_idx] == c].mean(0) for c in range(classes)])
    by_features = (torch.cdist(data.x[test], centroids).argmin(1) == data.y[test]).float().mean().item()
    assert by_relations > 0.9 and by_features < by_relations - 0.2, (by_relations, by_features)  # chance: 0.25


def test_entity_graphs_are_seeded_and_check_their_arguments():
    a, b = entity_like("mutag", 0.05, seed=4), entity_like("mutag", 0.05, seed=4)
    assert torch.equal(a.graph.graph.edge_index, b.graph.graph.edge_index) and torch.equal(a.x, b.x)
    with pytest.raises(ValueError, match="shape must be one of"):
        entity_like("cora")
    with pytest.raises(ValueError, match="scale"):
        entity_like("aifb", 0)


def test_mag_like_follows_ogbn_mags_shape_and_plants_classes_in_its_edges():
    data = mag_like(0.02, seed=1)
    graph = data.graph
    for node_type, full in MAG_NODES.items():
        assert graph.num_nodes_dict[node_type] == max(MAG_CLASSES, round(full * 0.02))
    for edge_type, full in MAG_EDGES.items():
        assert graph.num_edges_of(edge_type) == round(full * 0.02)
    papers = graph.num_nodes_dict["paper"]
    assert data.x["paper"].shape == (papers, MAG_FEATURES) and list(data.x) == ["paper"]
    assert data.y.shape == (papers,) and int(data.y.max()) < MAG_CLASSES == data.num_classes
    split = torch.cat([data.train_idx, data.val_idx, data.test_idx])
    assert torch.equal(split.sort().values, torch.arange(papers))
    assert abs(data.train_idx.numel() / papers - MAG_SPLIT[0] / MAG_NODES["paper"]) < 0.01
    src, dst = graph.relation(("paper", "cites", "paper")).coo()
    same = (data.y[src] == data.y[dst]).float().mean().item()
    shares = torch.bincount(data.y, minlength=MAG_CLASSES).double() / papers
    chance = float((shares**2).sum())
    assert abs(same - (0.7 + 0.3 * chance)) < 0.05, (same, chance)  # homophily 0.7 plus chance agreement
    degree = torch.bincount(dst, minlength=papers)
    assert int(degree.max()) > 10 * degree.double().mean().item()  # power-law in-degrees


def test_mag_like_is_seeded_checks_its_arguments_and_converts_to_pyg():
    a, b = mag_like(0.01, seed=3), mag_like(0.01, seed=3)
    assert torch.equal(a.graph.graph.edge_index, b.graph.graph.edge_index) and torch.equal(a.x["paper"], b.x["paper"])
    with pytest.raises(ValueError, match="scale must be in"):
        mag_like(1.5)
    with pytest.raises(ValueError, match="homophily must be in"):
        mag_like(0.01, homophily=2)
    pytest.importorskip("torch_geometric")
    data = a.to_pyg()
    assert data.node_types == list(MAG_NODES) and data.edge_types == list(MAG_EDGES)
    for edge_type in MAG_EDGES:
        assert torch.equal(data[edge_type].edge_index, torch.stack(a.graph.relation(edge_type).coo()))
    assert torch.equal(data["paper"].train_mask.nonzero().flatten(), a.train_idx)
    assert torch.equal(data["paper"].y, a.y) and data["author"].num_nodes == a.graph.num_nodes_dict["author"]
