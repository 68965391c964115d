"""NeighborLoader against an independent reference: PyG's batch layout from the full graph's edge list, the
per-vertex and per-edge tensors sliced, the inputs it takes, PyG models training on it, and bad input."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from featgraph import Graph, datasets
from featgraph.loader import Batch, NeighborLoader
from featgraph.loader.neighbor_loader import pyg_data_class
from tests.loader.reference import check_flat_batch

torch_geometric = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.nn import GraphSAGE, SAGEConv  # noqa: E402


@pytest.fixture(scope="module")
def cora() -> datasets.Dataset:
    return datasets.load("cora")


def cora_data(cora: datasets.Dataset) -> Data:
    gen = torch.Generator().manual_seed(0)
    num_edges = cora.graph.num_edges
    return Data(
        x=cora.features,
        y=cora.labels,
        edge_index=cora.edge_index,
        edge_attr=torch.randn(num_edges, 3, generator=gen),
        edge_weight=torch.rand(num_edges, generator=gen),
        train_mask=torch.zeros(cora.graph.num_nodes, dtype=torch.bool).index_fill_(0, cora.train_idx, True),
        num_classes=cora.num_classes,
    )


@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
@pytest.mark.parametrize("num_neighbors", [[10, 5], [3, -1, 2], [-1]], ids=["10-5", "3-all-2", "all"])
def test_batches_are_pyg_layout_samples_of_the_graph_with_tensors_sliced(cora, num_neighbors, replace):
    data = cora_data(cora)
    loader = NeighborLoader(
        data, num_neighbors, batch_size=50, input_nodes=cora.train_idx, replace=replace, seed=3, prefetch=1
    )
    batches = list(loader)
    assert len(batches) == len(loader) == 3 and [b.batch_size for b in batches] == [50, 50, 40]
    for batch in batches:
        assert isinstance(batch, Data)
        seeds = cora.train_idx[batch.input_id]
        check_flat_batch(cora.graph, batch, seeds, num_neighbors, replace)
        assert torch.equal(batch.x, data.x[batch.n_id]) and torch.equal(batch.y[: batch.batch_size], data.y[seeds])
        assert torch.equal(batch.train_mask, data.train_mask[batch.n_id])
        assert torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])
        assert torch.equal(batch.edge_weight, data.edge_weight[batch.e_id])
        assert batch.num_classes == cora.num_classes and batch.num_nodes == batch.n_id.numel()
    # the union of seeds over an epoch is input_nodes, each once
    seeds = torch.cat([cora.train_idx[b.input_id] for b in batches])
    assert torch.equal(torch.sort(seeds).values, torch.sort(cora.train_idx).values)


def test_a_boolean_mask_selects_the_same_seeds_as_its_indices(cora):
    """The same batches; ``input_id`` names a mask's seeds by vertex id and a list's by position, as PyG."""
    data = cora_data(cora)
    by_mask = list(NeighborLoader(data, [4, 4], batch_size=64, input_nodes=data.train_mask, seed=5, shuffle=True))
    ids = data.train_mask.nonzero().flatten()
    by_index = list(NeighborLoader(data, [4, 4], batch_size=64, input_nodes=ids, seed=5, shuffle=True))
    assert len(by_mask) == len(by_index) == 3
    for a, b in zip(by_mask, by_index, strict=True):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
        assert bool(data.train_mask[a.n_id[: a.batch_size]].all())
        assert torch.equal(a.input_id, a.n_id[: a.batch_size]) and torch.equal(ids[b.input_id], a.input_id)


def test_dataset_and_graph_with_tensors_give_the_same_batches_as_pyg_data(cora):
    data = Data(x=cora.features, y=cora.labels, edge_index=cora.edge_index)
    kwargs = dict(batch_size=100, input_nodes=cora.val_idx, seed=11)
    from_data = list(NeighborLoader(data, [5, 5], **kwargs))
    from_dataset = list(NeighborLoader(cora, [5, 5], **kwargs))
    from_graph = list(NeighborLoader(cora.graph, [5, 5], x=cora.features, y=cora.labels, **kwargs))
    for a, b, c in zip(from_data, from_dataset, from_graph, strict=True):
        for key in ("x", "y", "edge_index", "n_id", "e_id", "input_id"):
            assert torch.equal(a[key], b[key]) and torch.equal(a[key], c[key]), key
        check_flat_batch(cora.graph, a, cora.val_idx[a.input_id], [5, 5])


def test_per_hop_counts_let_pyg_trim_each_layer_to_what_it_needs(cora):
    torch.manual_seed(0)
    model = GraphSAGE(cora.features.shape[1], 16, num_layers=3, out_channels=cora.num_classes).eval()
    batch = next(iter(NeighborLoader(cora, [6, 4, 3], batch_size=32, seed=2)))
    full = model(batch.x, batch.edge_index)[: batch.batch_size]
    trimmed = model(
        batch.x,
        batch.edge_index,
        num_sampled_nodes_per_hop=batch.num_sampled_nodes,
        num_sampled_edges_per_hop=batch.num_sampled_edges,
    )[: batch.batch_size]
    torch.testing.assert_close(trimmed, full, rtol=1e-5, atol=1e-6)


def test_an_unchanged_pyg_model_trains_one_epoch_and_its_loss_decreases(cora):
    torch.manual_seed(0)
    convs = torch.nn.ModuleList([SAGEConv(cora.features.shape[1], 32), SAGEConv(32, cora.num_classes)])

    def model(x, edge_index):
        return convs[1](convs[0](x, edge_index).relu(), edge_index)

    optimizer = torch.optim.Adam(convs.parameters(), lr=0.02)
    train = cora.train_idx

    def train_loss() -> float:
        with torch.no_grad():
            out = model(cora.features, cora.edge_index)[train]
        return float(torch.nn.functional.cross_entropy(out, cora.labels[train]))

    before = train_loss()
    loader = NeighborLoader(cora, [10, 10], batch_size=20, input_nodes=train, seed=0)
    for batch in loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = torch.nn.functional.cross_entropy(out, batch.y[: batch.batch_size])
        loss.backward()
        optimizer.step()
    assert len(loader) == 7 and train_loss() < 0.7 * before


def test_without_pyg_a_batch_is_featgraph_s_with_the_same_names(cora, monkeypatch):
    for module in ("torch_geometric", "torch_geometric.data"):
        monkeypatch.setitem(sys.modules, module, None)  # importing PyG now fails
    pyg_data_class.cache_clear()
    try:
        batch = next(iter(NeighborLoader(cora, [4, 2], batch_size=16, seed=0)))
    finally:
        pyg_data_class.cache_clear()
    assert type(batch) is Batch
    assert torch.equal(batch.x, cora.features[batch.n_id]) and torch.equal(batch["y"], cora.labels[batch.n_id])
    assert batch.batch_size == 16 and "input_id" in batch
    check_flat_batch(cora.graph, batch, batch.n_id[:16], [4, 2])
    moved = batch.to("cpu")
    assert type(moved) is Batch and moved.keys() == batch.keys() and torch.equal(moved.x, batch.x)


@pytest.mark.parametrize(
    "num_neighbors, message",
    [
        ([2**31], r"num_neighbors must hold ints from 0 to 2\*\*31 - 1 or -1"),
        ([5, -2], "num_neighbors must hold"),
        ([2.5], "num_neighbors"),
        (5, "num_neighbors must be a list of per-hop neighbour counts"),
    ],
)
def test_bad_num_neighbors_is_named(cora, num_neighbors, message):
    with pytest.raises(ValueError, match=message):
        NeighborLoader(cora, num_neighbors)


@pytest.mark.parametrize("batch_size", [0, -3, 2.0, True])
def test_bad_batch_size_is_named(cora, batch_size):
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        NeighborLoader(cora, [5], batch_size=batch_size)


def test_rows_that_do_not_match_the_graph_are_named(cora):
    with pytest.raises(ValueError, match=r"x must have one row per vertex \(2708\), got shape \(2707, 1433\)"):
        NeighborLoader(cora.graph, [5], x=cora.features[:-1])
    with pytest.raises(ValueError, match="y must have one row per vertex"):
        NeighborLoader(Data(x=cora.features, y=cora.labels[:5], edge_index=cora.edge_index), [5])
    with pytest.raises(TypeError, match="x and y are passed only with a featgraph Graph"):
        NeighborLoader(cora, [5], x=cora.features)


def test_unknown_weight_attr_is_named(cora):
    with pytest.raises(ValueError, match="weight_attr 'w' names no per-edge tensor"):
        NeighborLoader(cora, [5], weight_attr="w")


def test_weight_attr_draws_only_edges_of_positive_weight(cora):
    weight = torch.rand(cora.graph.num_edges, generator=torch.Generator().manual_seed(1))
    weight[weight < 0.5] = 0
    data = Data(x=cora.features, edge_index=cora.edge_index, edge_weight=weight)
    for batch in NeighborLoader(data, [3, 3], batch_size=500, weight_attr="edge_weight", seed=0):
        assert batch.e_id.numel() > 0 and bool((weight[batch.e_id] > 0).all())
        assert torch.equal(batch.edge_weight, weight[batch.e_id])


def test_a_graph_without_tensors_gives_batches_of_ids_alone():
    graph = Graph(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 5)  # vertex 4 isolated
    batches = list(NeighborLoader(graph, [-1, -1], batch_size=2, shuffle=False, seed=0))
    assert [b.n_id[: b.batch_size].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    for batch in batches:
        assert "x" not in batch
        check_flat_batch(graph, batch, batch.n_id[: batch.batch_size], [-1, -1])


def test_bidirectional_batches_add_each_sampled_edge_reversed_and_pygs_flags_change_nothing(cora):
    data = cora_data(cora)

    def batches(**kwargs) -> list:
        return list(NeighborLoader(data, [3, 2], batch_size=200, seed=8, **kwargs))

    for directed, both, flagged in zip(
        batches(), batches(subgraph_type="bidirectional"), batches(is_sorted=True, filter_per_worker=False), strict=True
    ):
        assert torch.equal(directed.edge_index, flagged.edge_index) and torch.equal(directed.e_id, flagged.e_id)
        assert torch.equal(directed.n_id, both.n_id) and "num_sampled_nodes" not in both
        pairs = set(map(tuple, directed.edge_index.t().tolist()))
        assert set(map(tuple, both.edge_index.t().tolist())) == pairs | {(v, u) for u, v in pairs}
        assert both.edge_index.shape[1] == len(pairs | {(v, u) for u, v in pairs})  # each pair once
        ends = both.n_id[both.edge_index]
        src, dst = data.edge_index[:, both.e_id]
        assert bool((((ends[0] == src) & (ends[1] == dst)) | ((ends[0] == dst) & (ends[1] == src))).all())
    with pytest.raises(ValueError, match="the induced subgraph is not supported"):
        NeighborLoader(data, [3], subgraph_type="induced")
    with pytest.raises(TypeError, match="is_sorted must be a bool"):
        NeighborLoader(data, [3], is_sorted="yes")


def test_memory_mapped_features_come_as_tensors_of_the_batchs_rows(cora, tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, cora.features.numpy())
    mapped = np.load(path, mmap_mode="r")
    data = Data(x=mapped, y=cora.labels, edge_index=cora.edge_index)
    for batch in NeighborLoader(data, [4, 2], batch_size=300, seed=1):
        assert isinstance(batch.x, torch.Tensor)
        assert torch.equal(batch.x, cora.features[batch.n_id])


def test_a_feature_store_and_graph_store_give_the_datas_batches_reading_only_their_rows(cora):
    from torch_geometric.testing import MyFeatureStore, MyGraphStore

    class CountingStore(MyFeatureStore):
        def _get_tensor(self, attr):
            self.rows_read = getattr(self, "rows_read", 0) + (attr.index.numel() if attr.index is not None else -1)
            return super()._get_tensor(attr)

    features, graph_store = CountingStore(), MyGraphStore()
    features.put_tensor(cora.features, group_name=None, attr_name="x", index=None)
    features.put_tensor(cora.labels, group_name=None, attr_name="y", index=None)
    n = cora.graph.num_nodes
    graph_store.put_edge_index((cora.edge_index[0], cora.edge_index[1]), edge_type=None, layout="coo", size=(n, n))
    data = Data(x=cora.features, y=cora.labels, edge_index=cora.edge_index)
    kwargs = dict(batch_size=128, input_nodes=cora.train_idx, seed=3)
    stores = NeighborLoader((features, graph_store), [4, 3], **kwargs)
    pairs = zip(NeighborLoader(data, [4, 3], **kwargs), stores, strict=True)
    read = 0
    for from_data, from_stores in pairs:
        for key in ("n_id", "e_id", "edge_index", "x", "y"):
            assert torch.equal(from_data[key], from_stores[key]), key
        read += 2 * from_stores.n_id.numel()
    assert features.rows_read == read  # each batch's rows of x and y, nothing else
    graph_store.put_edge_index((cora.edge_index[1], cora.edge_index[0]), edge_type=("a", "to", "b"), layout="coo",
                               size=(n, n))  # fmt: skip
    with pytest.raises(ValueError, match="the graph store holds 2 edge types"):
        NeighborLoader((features, graph_store), [2])


def test_defaults_are_pygs_so_ported_code_batches_alike(cora):
    """PyG's loaders take batches of 1 in input order unless told otherwise; an evaluation loop that lines
    up predictions with ``input_nodes`` relies on it."""
    from featgraph.loader import LinkNeighborLoader

    data = cora_data(cora)
    for loader in (NeighborLoader(data, [2]), LinkNeighborLoader(data, [2])):
        assert (loader.batch_size, loader.shuffle) == (1, False)
    loader = NeighborLoader(data, [2], input_nodes=cora.test_idx[:5])
    assert [int(batch.n_id[0]) for batch in loader] == cora.test_idx[:5].tolist()


def test_no_hops_give_the_seeds_alone_and_a_graph_without_edges_samples(cora):
    """PyG's ``num_neighbors=[]``: each batch is its seeds, no edges; a Data with vertices and no edge_index
    samples the same way; the link loader's batch holds its seed edges' endpoints alone."""
    from featgraph.loader import LinkNeighborLoader

    data = cora_data(cora)
    for batch in NeighborLoader(data, [], batch_size=100, input_nodes=cora.val_idx):
        assert torch.equal(batch.n_id, cora.val_idx[batch.input_id]) and batch.edge_index.shape == (2, 0)
        assert torch.equal(batch.x, cora.features[batch.n_id]) and batch.num_sampled_edges == []
    pairs = torch.randint(0, 50, (2, 60), generator=torch.Generator().manual_seed(0))
    for batch in LinkNeighborLoader(Data(num_nodes=50), [], batch_size=20, edge_label_index=pairs):
        assert batch.edge_label_index.shape == (2, 20) and batch.edge_index.shape == (2, 0)
        assert torch.equal(batch.n_id[batch.edge_label_index], pairs[:, batch.input_id])
        assert batch.num_nodes == pairs[:, batch.input_id].unique().numel()


def test_disjoint_batches_hold_each_seeds_own_subgraph(cora):
    """With every neighbour taken, subgraph ``s`` is exactly the single-seed batch of its seed (vertices and
    edges), the seeds come first, and ``batch`` names each vertex's subgraph; the link loader's triplets come
    in PyG's disjoint layout."""
    from featgraph.loader import LinkNeighborLoader

    data = cora_data(cora)
    seeds = torch.tensor([5, 17, 1200, 9])
    disjoint = NeighborLoader(data, [-1, -1], batch_size=4, input_nodes=seeds, disjoint=True)(torch.arange(4))
    assert torch.equal(disjoint.n_id[:4], seeds) and torch.equal(disjoint.batch[:4], torch.arange(4))
    assert torch.equal(disjoint.x, cora.features[disjoint.n_id])
    for s, vertex in enumerate(seeds.tolist()):
        alone = NeighborLoader(data, [-1, -1], batch_size=1, input_nodes=torch.tensor([vertex]))(torch.arange(1))
        mine = (disjoint.batch == s).nonzero().flatten()
        assert set(disjoint.n_id[mine].tolist()) == set(alone.n_id.tolist())
        inside = disjoint.batch[disjoint.edge_index[1]] == s
        assert bool((disjoint.batch[disjoint.edge_index[0][inside]] == s).all())
        assert sorted(disjoint.e_id[inside].tolist()) == sorted(alone.e_id.tolist())
        ends = disjoint.n_id[disjoint.edge_index[:, inside]]
        assert torch.equal(ends, data.edge_index[:, disjoint.e_id[inside]])
    triplets = LinkNeighborLoader(
        data, [3], edge_label_index=cora.edge_index[:, :30], batch_size=10, disjoint=True,
        neg_sampling=dict(mode="triplet", amount=2), seed=1,
    )  # fmt: skip
    for batch in triplets:
        assert torch.equal(batch.src_index, torch.arange(10)) and torch.equal(batch.dst_pos_index, torch.arange(10, 20))
        assert torch.equal(batch.dst_neg_index, torch.arange(20, 40).view(2, 10).t())
        assert torch.equal(batch.batch[:40], torch.arange(10).repeat(4))
        assert torch.equal(batch.n_id[batch.src_index], cora.edge_index[0, batch.input_id])


def temporal_data(seed: int = 0) -> Data:
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, 40, (2, 300), generator=gen)
    return Data(
        x=torch.arange(40) * 10,
        edge_index=edge_index,
        time=torch.randint(0, 20, (40,), generator=gen),
        edge_time=torch.randint(0, 20, (300,), generator=gen),
        num_nodes=40,
    )


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("level", ["time", "edge_time"])
def test_temporal_batches_sample_each_seeds_past(level, strategy):
    from tests.sampling.test_disjoint import check

    data = temporal_data()
    input_time = None if level == "time" else torch.randint(5, 20, (40,), generator=torch.Generator().manual_seed(1))
    loader = NeighborLoader(
        data, [3, 2], batch_size=8, time_attr=level, input_time=input_time, temporal_strategy=strategy, seed=0
    )
    graph = Graph(data.edge_index[0], data.edge_index[1], 40)
    node_time, edge_time = (data.time, None) if level == "time" else (None, data.edge_time)
    for batch in loader:
        seeds = batch.n_id[: batch.batch_size]
        want = data.time[seeds] if input_time is None else input_time[batch.input_id]
        assert torch.equal(batch.seed_time, want)
        check(graph, batch, seeds, batch.seed_time, [3, 2], node_time, edge_time)
        assert torch.equal(batch.x, data.x[batch.n_id]) and torch.equal(batch.edge_time, data.edge_time[batch.e_id])
        if level == "time":  # PyG's own check: no vertex later than its subgraph's seed
            assert bool((batch.time <= batch.seed_time[batch.batch]).all())


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"input_time": torch.zeros(40)}, ValueError, "input_time is given without time_attr"),
        ({"time_attr": "time", "input_time": torch.zeros(3)}, ValueError, r"input_time must hold one time per entry"),
        ({"time_attr": "nothing"}, ValueError, "time_attr 'nothing' names no per-vertex or per-edge tensor"),
        ({"time_attr": "time", "weight_attr": "edge_time"}, ValueError, "weight_attr is given with time_attr"),
        ({"temporal_strategy": "last"}, ValueError, "temporal_strategy is given"),
        ({"time_attr": "edge_time"}, ValueError, "input_time is required with edge-level times"),
    ],
)
def test_bad_temporal_arguments_are_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        next(iter(NeighborLoader(temporal_data(), [2], batch_size=4, **kwargs)))


@pytest.mark.parametrize("options", [{}, {"subgraph_type": "bidirectional"}, {"disjoint": True}])
@pytest.mark.parametrize("layout", [torch.sparse_csr, torch.sparse_coo], ids=["csr", "coo"])
def test_a_data_stored_as_adj_t_samples_its_edges_into_pygs_batch(cora, layout, options):
    """A ``Data`` after PyG's ``ToSparseTensor`` (``adj_t``, ``edge_weight`` moved into its values, per-edge
    values in its order) samples the edges of the same ``Data`` kept as PyG's sorted ``edge_index``; each batch
    carries, as PyG's, the sampled ``adj_t`` (batch destinations x sources, its values sliced by ``e_id``) and
    no ``edge_index``, unless the data keeps both."""
    transforms = torch_geometric.transforms
    data = cora_data(cora)
    kept = transforms.ToSparseTensor(layout=layout, remove_edge_index=False)(data.clone())
    sparse = kept.clone()
    del sparse.edge_index
    reference = kept.clone()
    reference.edge_weight = kept.adj_t.values() if layout == torch.sparse_csr else kept.adj_t._values()
    del reference.adj_t
    args = ([4, 3],)
    kwargs = {"batch_size": 64, "input_nodes": cora.train_idx, "shuffle": True, "seed": 5, **options}
    batches = zip(NeighborLoader(sparse, *args, **kwargs), NeighborLoader(reference, *args, **kwargs), strict=True)
    for ours, theirs in batches:
        assert "edge_index" not in ours and ours.adj_t.layout == layout
        for key in ("n_id", "e_id", "x", "y", "edge_attr"):
            assert torch.equal(ours[key], theirs[key])
        n = theirs.n_id.numel()
        weight = reference.edge_weight[theirs.e_id]
        want = torch.sparse_coo_tensor(theirs.edge_index.flip(0), weight, (n, n)).to_dense()
        torch.testing.assert_close(ours.adj_t.to_dense(), want)
    both = next(iter(NeighborLoader(kept, *args, **kwargs)))
    assert "edge_index" in both and both.adj_t.shape == (both.n_id.numel(),) * 2
    assert sparse.adj_t.shape == (cora.graph.num_nodes,) * 2  # the caller's data is left as it was


class FakeSparseTensor:
    """What the loader uses of a ``torch_sparse.SparseTensor`` (not installed here): ``coo()``,
    ``sparse_sizes()``, ``storage.value()`` and its constructor from ``row``, ``col``, ``value`` and sizes."""

    def __init__(self, row, col, value=None, sparse_sizes=None):
        self.row, self.col, self.values, self.sizes = row, col, value, tuple(sparse_sizes)
        self.storage = self  # SparseTensor.storage.value()

    def value(self):
        return self.values

    def coo(self):
        return self.row, self.col, self.values

    def sparse_sizes(self):
        return self.sizes


def test_a_sparse_tensor_adj_t_gives_batches_of_its_own_kind(cora):
    """A ``SparseTensor`` ``adj_t`` (read by its methods: torch_sparse is never imported) is sampled as the
    ``edge_index`` it transposes, and each batch holds a ``SparseTensor`` of the sampled edges, as PyG's."""
    src, dst = cora.edge_index
    weight = torch.rand(src.numel(), generator=torch.Generator().manual_seed(0))
    n = cora.graph.num_nodes
    sparse = Data(x=cora.features, adj_t=FakeSparseTensor(dst, src, weight, (n, n)), num_nodes=n)
    reference = Data(x=cora.features, edge_index=cora.edge_index, num_nodes=n)
    kwargs = {"batch_size": 50, "input_nodes": cora.train_idx, "seed": 1}
    batches = zip(NeighborLoader(sparse, [3, 2], **kwargs), NeighborLoader(reference, [3, 2], **kwargs), strict=True)
    for ours, theirs in batches:
        assert isinstance(ours.adj_t, FakeSparseTensor) and "edge_index" not in ours
        assert torch.equal(ours.e_id, theirs.e_id) and ours.adj_t.sizes == (theirs.n_id.numel(),) * 2
        assert torch.equal(torch.stack([ours.adj_t.col, ours.adj_t.row]), theirs.edge_index)
        assert torch.equal(ours.adj_t.values, weight[theirs.e_id])
