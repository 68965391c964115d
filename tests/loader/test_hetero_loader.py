"""HeteroNeighborLoader against independent references: PyG's HeteroData batch layout checked against the full
data (values sliced by n_id / e_id, edges mapping back to input edges), a PyG ``to_hetero`` model whose seed
outputs on batches sampled with every neighbour equal its outputs on the full graph, epochs covering the
seeds once, and bad input named."""

from __future__ import annotations

import pytest
import torch

from featgraph.loader import HeteroNeighborLoader, NeighborLoader

torch_geometric = pytest.importorskip("torch_geometric")
from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.nn import SAGEConv, to_hetero  # noqa: E402

PAPERS, AUTHORS, VENUES = 70, 40, 6


def hetero_data(seed: int = 0) -> HeteroData:
    """Papers, authors and venues with features, labels, a mask, per-edge attributes and weights; duplicate
    edges and self loops in ``cites``; a node type with features and no edges; a graph-level value."""
    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data["paper"].x = torch.randn(PAPERS, 5, generator=gen)
    data["paper"].y = torch.randint(0, 3, (PAPERS,), generator=gen)
    data["paper"].train_mask = torch.rand(PAPERS, generator=gen) < 0.5
    data["author"].x = torch.randn(AUTHORS, 5, generator=gen)
    data["venue"].num_nodes = VENUES
    data["lonely"].x = torch.randn(4, 5, generator=gen)
    cites = torch.randint(0, PAPERS, (2, 300), generator=gen)
    data["paper", "cites", "paper"].edge_index = torch.cat([cites, cites[:, :10], torch.arange(4).repeat(2, 1)], 1)
    writes = torch.stack(
        [torch.randint(0, AUTHORS, (150,), generator=gen), torch.randint(0, PAPERS, (150,), generator=gen)]
    )
    data["author", "writes", "paper"].edge_index = writes
    data["author", "writes", "paper"].edge_attr = torch.randn(150, 2, generator=gen)
    data["paper", "rev_writes", "author"].edge_index = writes.flip(0)
    venue = torch.randint(0, VENUES, (PAPERS,), generator=gen)
    data["venue", "has", "paper"].edge_index = torch.stack([venue, torch.arange(PAPERS)])
    data["paper", "in", "venue"].edge_index = torch.stack([torch.arange(PAPERS), venue])
    for edge_type in data.edge_types:
        data[edge_type].weight = torch.rand(data[edge_type].num_edges, generator=gen)
    data.name = "toy"
    return data


def test_a_heterodata_gets_the_typed_loader() -> None:
    loader = NeighborLoader(hetero_data(), [2, 2], batch_size=8, input_nodes=("paper", None), seed=0)
    assert isinstance(loader, HeteroNeighborLoader)
    assert len(loader) == -(-PAPERS // 8)


@pytest.mark.parametrize("num_neighbors", [[3, 2], "dict"], ids=["list", "dict"])
def test_batches_are_pygs_layout_sliced_from_the_full_data(num_neighbors) -> None:
    data = hetero_data()
    if num_neighbors == "dict":
        num_neighbors = {et: [2, 1] if et[1] != "cites" else [4, 0] for et in data.edge_types}
    seeds = torch.arange(3, PAPERS, 3)
    loader = NeighborLoader(data, num_neighbors, batch_size=7, input_nodes=("paper", seeds), seed=1, shuffle=True)
    seen = []
    for batch in loader:
        assert isinstance(batch, HeteroData)
        size = batch["paper"].batch_size
        assert torch.equal(batch["paper"].n_id[:size], seeds[batch["paper"].input_id])
        seen.append(batch["paper"].n_id[:size])
        for node_type in data.node_types:
            store, n_id = batch[node_type], batch[node_type].n_id
            assert n_id.unique().numel() == n_id.numel()
            assert batch[node_type].num_nodes == n_id.numel()
            assert sum(store.num_sampled_nodes) == n_id.numel()
            for key in ("x", "y", "train_mask"):
                if key in data[node_type]:
                    assert torch.equal(store[key], data[node_type][key][n_id])
        for edge_type in data.edge_types:
            store, e_id = batch[edge_type], batch[edge_type].e_id
            src_type, _, dst_type = edge_type
            original = data[edge_type].edge_index[:, e_id]
            assert torch.equal(batch[src_type].n_id[store.edge_index[0]], original[0])
            assert torch.equal(batch[dst_type].n_id[store.edge_index[1]], original[1])
            assert torch.equal(store.weight, data[edge_type].weight[e_id])
            assert sum(store.num_sampled_edges) == e_id.numel()
        assert torch.equal(
            batch["author", "writes", "paper"].edge_attr,
            data["author", "writes", "paper"].edge_attr[batch["author", "writes", "paper"].e_id],
        )
        assert batch.name == "toy"
    assert torch.equal(torch.cat(seen).sort().values, seeds)  # each seed once per epoch
    assert data["paper"].x.shape[0] == PAPERS and "n_id" not in data["paper"]  # the caller's data untouched


class SAGE(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = SAGEConv((-1, -1), 8)
        self.second = SAGEConv((-1, -1), 3)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x, edge_index).relu(), edge_index)


def test_every_neighbour_gives_the_full_graphs_seed_outputs() -> None:
    data = hetero_data(seed=2)
    del data["lonely"]
    data["venue"].x = torch.randn(VENUES, 5)
    torch.manual_seed(0)
    model = to_hetero(SAGE(), data.metadata(), aggr="sum")
    with torch.no_grad():
        full = model(data.x_dict, data.edge_index_dict)["paper"]
        loader = NeighborLoader(data, [-1, -1], batch_size=16, input_nodes=("paper", None), shuffle=False)
        for batch in loader:
            out = model(batch.x_dict, batch.edge_index_dict)["paper"][: batch["paper"].batch_size]
            torch.testing.assert_close(out, full[batch["paper"].n_id[: batch["paper"].batch_size]])


def test_a_to_hetero_model_trains_on_the_batches() -> None:
    data = hetero_data(seed=3)
    del data["lonely"]
    data["venue"].x = torch.randn(VENUES, 5)
    data["paper"].y = (data["paper"].x[:, 0] > 0).long()  # a label the features give away
    torch.manual_seed(0)
    model = to_hetero(SAGE(), data.metadata())
    loader = NeighborLoader(data, [5, 5], batch_size=16, input_nodes=("paper", None), seed=4)
    model(data.x_dict, data.edge_index_dict)  # materialise the lazy sizes
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(15):
        for batch in loader:
            size = batch["paper"].batch_size
            loss = torch.nn.functional.cross_entropy(
                model(batch.x_dict, batch.edge_index_dict)["paper"][:size], batch["paper"].y[:size]
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5


def test_input_nodes_as_a_type_a_mask_and_the_seed_reproduces_batches() -> None:
    data = hetero_data()
    by_type = NeighborLoader(data, [2], batch_size=50, input_nodes="author", shuffle=False)
    assert torch.equal(next(iter(by_type))["author"].n_id[:50], torch.arange(40))
    mask = data["paper"].train_mask
    loader = NeighborLoader(data, [2, 2], batch_size=9, input_nodes=("paper", mask), seed=5)
    again = NeighborLoader(data, [2, 2], batch_size=9, input_nodes=("paper", mask), seed=5, prefetch=0)
    for one, two in zip(loader, again, strict=True):
        assert bool(mask[one["paper"].n_id[: one["paper"].batch_size]].all())
        for key in data.node_types:
            assert torch.equal(one[key].n_id, two[key].n_id)
        for key in data.edge_types:
            assert torch.equal(one[key].edge_index, two[key].edge_index)


def test_weighted_draws_never_take_zero_weight_edges() -> None:
    data = hetero_data()
    for edge_type in data.edge_types:
        data[edge_type].weight = (torch.arange(data[edge_type].num_edges) % 3 != 0).float()
    loader = NeighborLoader(data, [3, 3], batch_size=20, input_nodes=("paper", None), weight_attr="weight", seed=0)
    for batch in loader:
        for edge_type in data.edge_types:
            assert bool((batch[edge_type].e_id % 3 != 0).all())


def test_bad_input_is_named() -> None:
    data = hetero_data()
    with pytest.raises(ValueError, match="input_nodes: a HeteroData needs the seeds' node type"):
        NeighborLoader(data, [2])
    with pytest.raises(ValueError, match="input_nodes: unknown node type 'nope'"):
        NeighborLoader(data, [2], input_nodes=("nope", None))
    with pytest.raises(TypeError, match="input_nodes: a HeteroData's seeds are a node type"):
        NeighborLoader(data, [2], input_nodes=torch.arange(3))
    with pytest.raises(ValueError, match="input_nodes holds vertex id 40"):
        NeighborLoader(data, [2], input_nodes=("author", torch.tensor([40])))
    with pytest.raises(ValueError, match="num_neighbors: no fan-outs for edge type"):
        NeighborLoader(data, {("paper", "cites", "paper"): [2]}, input_nodes="paper")
    with pytest.raises(ValueError, match="weight_attr 'w': edge type"):
        NeighborLoader(data, [2], input_nodes="paper", weight_attr="w")
    with pytest.raises(ValueError, match="the induced subgraph is not supported"):
        NeighborLoader(data, [2], input_nodes="paper", subgraph_type="induced")
    with pytest.raises(ValueError, match="time_attr 'time' names no per-vertex or per-edge values"):
        NeighborLoader(data, [2], input_nodes="paper", time_attr="time")
    with pytest.raises(TypeError, match="time_attr must name"):
        NeighborLoader(data, [2], input_nodes="paper", time_attr=3)
    with pytest.raises(TypeError, match="data: expected a PyG HeteroData"):
        HeteroNeighborLoader(object(), [2], input_nodes="paper")


def test_a_typed_store_pair_gives_the_heterodatas_batches():
    """PyG's remote-backend pair with edge types stored as COO, CSR and CSC: the same vertices, edges and
    features per batch as the HeteroData holding the same graph, and each type's num_nodes named."""
    from torch_geometric.testing import MyFeatureStore, MyGraphStore

    data = hetero_data(seed=4)
    del data["lonely"]
    data["venue"].x = torch.randn(VENUES, 5)
    features, graph_store = MyFeatureStore(), MyGraphStore()
    for node_type in data.node_types:
        features.put_tensor(data[node_type].x, group_name=node_type, attr_name="x", index=None)
    for i, edge_type in enumerate(data.edge_types):
        src_type, _, dst_type = edge_type
        size = (data[src_type].num_nodes, data[dst_type].num_nodes)
        index = data[edge_type].edge_index
        if i % 3 == 1:  # CSR: the edges grouped by source, as the store keeps them
            index = index[:, torch.argsort(index[0] * size[1] + index[1], stable=True)]
            data[edge_type].edge_index = index
            ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(index[0], minlength=size[0]).cumsum(0)])
            graph_store.put_edge_index((ptr, index[1]), edge_type=edge_type, layout="csr", size=size)
        else:
            graph_store.put_edge_index((index[0], index[1]), edge_type=edge_type, layout="coo", size=size)
    kwargs = dict(batch_size=16, input_nodes=("paper", torch.arange(PAPERS)), seed=2)
    stores = NeighborLoader((features, graph_store), [3, 2], **kwargs)
    assert isinstance(stores, HeteroNeighborLoader) and repr(stores) == "NeighborLoader()"
    for one, two in zip(NeighborLoader(data, [3, 2], **kwargs), stores, strict=True):
        for node_type in data.node_types:
            assert torch.equal(one[node_type].n_id, two[node_type].n_id)
            assert torch.equal(two[node_type].x, data[node_type].x[two[node_type].n_id])
            assert two[node_type].num_nodes == two[node_type].n_id.numel()
        for edge_type in data.edge_types:
            assert torch.equal(one[edge_type].edge_index, two[edge_type].edge_index)
            assert torch.equal(one[edge_type].e_id, two[edge_type].e_id)


def test_bidirectional_batches_merge_each_edge_type_with_its_reverse_as_pyg():
    """Each typed batch's edges against a reference built from the directional batch of the same seed:
    ``writes`` merged with ``rev_writes`` reversed (and ``rev_writes`` its mirror), ``cites`` (paper to paper,
    no reverse type) with itself reversed, ``has``/``in`` (venue and paper, no ``rev_``) each with the other."""
    data = hetero_data(seed=5)
    kwargs = dict(batch_size=10, input_nodes=("paper", None), seed=3)
    for one, two in zip(
        NeighborLoader(data, [3, 2], **kwargs),
        NeighborLoader(data, [3, 2], subgraph_type="bidirectional", **kwargs),
        strict=True,
    ):

        def merged(edge_type, reverse, one=one):
            both = torch.cat([one[edge_type].edge_index, one[reverse].edge_index.flip(0)], dim=1)
            pairs = sorted(set(map(tuple, both.t().tolist())), key=lambda pair: (pair[1], pair[0]))
            return torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)

        writes, rev_writes = ("author", "writes", "paper"), ("paper", "rev_writes", "author")
        cites, has, into = ("paper", "cites", "paper"), ("venue", "has", "paper"), ("paper", "in", "venue")
        assert torch.equal(two[writes].edge_index, merged(writes, rev_writes))
        assert torch.equal(two[rev_writes].edge_index, two[writes].edge_index.flip(0))
        assert torch.equal(two[cites].edge_index, merged(cites, cites))
        assert torch.equal(two[has].edge_index, merged(has, into))
        assert torch.equal(two[into].edge_index, merged(into, has))
        for edge_type in data.edge_types:
            assert "e_id" not in two[edge_type] and "weight" not in two[edge_type]
            assert "num_sampled_edges" not in two[edge_type]
        assert torch.equal(one["paper"].n_id, two["paper"].n_id) and "num_sampled_nodes" not in two["paper"]


@pytest.mark.parametrize("level", ["node", "edge"])
def test_temporal_batches_sample_each_seeds_past_per_edge_type(level):
    """Each seed's subgraph: vertices no later than the seed (types without times always allowed), at most
    the edge type's fan-out of allowed in-edges per vertex, every one allowed, all of them under -1."""
    data = hetero_data()
    gen = torch.Generator().manual_seed(4)
    if level == "node":
        data["paper"].time = torch.randint(0, 20, (PAPERS,), generator=gen)
        data["author"].time = torch.randint(0, 20, (AUTHORS,), generator=gen)  # venues have none
    else:
        for edge_type in data.edge_types:
            data[edge_type].time = torch.randint(0, 20, (data[edge_type].num_edges,), generator=gen)
    fanouts = {et: [3, -1] if et[1] == "cites" else [2, 1] for et in data.edge_types}
    input_time = torch.randint(5, 20, (PAPERS,), generator=gen)
    loader = NeighborLoader(
        data, fanouts, input_nodes="paper", time_attr="time", input_time=input_time, batch_size=8, seed=0
    )
    for batch in loader:
        seeds = batch["paper"].n_id[: batch["paper"].batch_size]
        assert torch.equal(seeds, batch["paper"].input_id)
        assert torch.equal(batch["paper"].seed_time, input_time[batch["paper"].input_id])
        limit = batch["paper"].seed_time
        for node_type in batch.node_types:
            store = batch[node_type]
            skip = batch["paper"].batch_size if node_type == "paper" else 0  # the seeds: there whatever their time
            if level == "node" and "time" in data[node_type]:
                assert bool((store.time[skip:] <= limit[store.batch[skip:]]).all())
        for edge_type in data.edge_types:
            src_type, _, dst_type = edge_type
            store, full = batch[edge_type], data[edge_type]
            src, dst = store.edge_index
            assert torch.equal(full.edge_index[:, store.e_id], torch.stack([
                batch[src_type].n_id[src], batch[dst_type].n_id[dst]]))  # fmt: skip
            assert torch.equal(batch[src_type].batch[src], batch[dst_type].batch[dst])
            if level == "edge" or "time" in data[src_type]:
                when = data[src_type].time[batch[src_type].n_id[src]] if level == "node" else full.time[store.e_id]
                assert bool((when <= limit[batch[dst_type].batch[dst]]).all())
            if edge_type[1] != "cites" and dst.numel():  # fan-outs 2 then 1: at most 2 per destination and seed
                assert int(torch.unique(batch[dst_type].batch[dst] * 1000 + dst, return_counts=True)[1].max()) <= 2


def test_temporal_typed_seeds_take_their_own_time_and_bad_temporal_input_is_named():
    data = hetero_data()
    data["paper"].time = torch.arange(PAPERS)
    batch = next(iter(NeighborLoader(data, [-1], input_nodes="paper", time_attr="time", batch_size=5)))
    assert torch.equal(batch["paper"].seed_time, torch.arange(5))
    assert bool((batch["paper"].time <= batch["paper"].seed_time[batch["paper"].batch]).all())
    cases = [
        ({"input_time": torch.zeros(PAPERS)}, "input_time is given without time_attr"),
        ({"time_attr": "nothing"}, "time_attr 'nothing' names no per-vertex or per-edge values"),
        ({"time_attr": "time", "replace": True}, "replace is given with time_attr"),
        ({"time_attr": "time", "subgraph_type": "bidirectional"}, "bidirectional' is given with time_attr"),
        ({"time_attr": "time", "input_time": torch.zeros(2)}, "input_time must hold one time per entry"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            NeighborLoader(data, [2], input_nodes="paper", batch_size=4, **kwargs)


@pytest.mark.parametrize("replace", [False, True])
def test_disjoint_typed_batches_give_each_seed_its_subgraph_drawn_by_weight(replace):
    data = hetero_data()
    for edge_type in data.edge_types:
        data[edge_type].weight = (torch.arange(data[edge_type].num_edges) % 3 != 0).float()
    loader = NeighborLoader(
        data, [3, 2], input_nodes="paper", batch_size=6, disjoint=True, weight_attr="weight", replace=replace, seed=0
    )
    for batch in loader:
        seeds = batch["paper"].batch_size
        assert torch.equal(batch["paper"].batch[:seeds], torch.arange(seeds))
        for edge_type in data.edge_types:
            src_type, _, dst_type = edge_type
            store = batch[edge_type]
            assert bool((data[edge_type].weight[store.e_id] > 0).all())  # never a zero-weight edge
            src, dst = store.edge_index
            assert torch.equal(batch[src_type].batch[src], batch[dst_type].batch[dst])
            assert torch.equal(data[edge_type].edge_index[:, store.e_id], torch.stack([
                batch[src_type].n_id[src], batch[dst_type].n_id[dst]]))  # fmt: skip


@pytest.mark.parametrize("disjoint", [False, True])
def test_a_big_endian_array_gives_native_rows_per_batch(disjoint) -> None:
    """Per-node and per-edge NumPy arrays in the other byte order (a ``">f4"`` memmap) are read per batch, only
    the batch's rows, in native byte order: the same batches as native tensors of the same values."""
    np = pytest.importorskip("numpy")
    native, foreign = hetero_data(), hetero_data()
    foreign["paper"].x = native["paper"].x.numpy().astype(">f4")
    edge_attr = native["author", "writes", "paper"].edge_attr
    foreign["author", "writes", "paper"].edge_attr = edge_attr.double().numpy().astype(">f8")
    native["author", "writes", "paper"].edge_attr = edge_attr.double()
    options = {"batch_size": 9, "input_nodes": ("paper", None), "seed": 2, "disjoint": disjoint}
    batches = zip(NeighborLoader(foreign, [3, 2], **options), NeighborLoader(native, [3, 2], **options), strict=True)
    for ours, theirs in batches:
        assert ours["paper"].x.dtype == torch.float32 and torch.equal(ours["paper"].x, theirs["paper"].x)
        got, want = ours["author", "writes", "paper"].edge_attr, theirs["author", "writes", "paper"].edge_attr
        assert got.dtype == torch.float64 and torch.equal(got, want)
    assert isinstance(foreign["paper"].x, np.ndarray) and foreign["paper"].x.dtype == np.dtype(">f4")  # untouched


@pytest.mark.parametrize("options", [{}, {"subgraph_type": "bidirectional"}, {"disjoint": True}])
@pytest.mark.parametrize("layout", [torch.sparse_csr, torch.sparse_coo], ids=["csr", "coo"])
def test_a_heterodata_stored_as_adj_t_samples_its_edges_into_pygs_batch(layout, options) -> None:
    """A ``HeteroData`` after PyG's ``ToSparseTensor`` (each edge type's ``adj_t``, its ``weight`` moved into the
    values) samples the edges of the same data kept as PyG's sorted ``edge_index``: per edge type the sampled
    ``adj_t`` (batch destinations x sources, values sliced by ``e_id``; ones on merged types, as PyG's) and no
    ``edge_index``, unless the data keeps both."""
    from torch_geometric.transforms import ToSparseTensor
    from torch_geometric.utils import coalesce

    data = hetero_data()
    for edge_type in data.edge_types:  # no duplicate edges: PyG's adj_t would merge them, its edge values not
        store = data[edge_type]
        keys = [k for k in ("weight", "edge_attr") if k in store]
        size = max(data[edge_type[0]].num_nodes, data[edge_type[2]].num_nodes)
        store.edge_index, values = coalesce(store.edge_index, [store[k] for k in keys], num_nodes=size)
        for key, value in zip(keys, values, strict=True):
            store[key] = value
    kept = ToSparseTensor(attr="weight", layout=layout, remove_edge_index=False)(data.clone())
    sparse, reference = kept.clone(), kept.clone()
    for edge_type in kept.edge_types:
        del sparse[edge_type].edge_index, reference[edge_type].adj_t
        adj_t = kept[edge_type].adj_t
        reference[edge_type].weight = adj_t.values() if layout == torch.sparse_csr else adj_t._values()
    kwargs = {"batch_size": 16, "input_nodes": ("paper", None), "seed": 4, "shuffle": True, **options}
    batches = zip(NeighborLoader(sparse, [3, 2], **kwargs), NeighborLoader(reference, [3, 2], **kwargs), strict=True)
    for ours, theirs in batches:
        for node_type in data.node_types:
            assert torch.equal(ours[node_type].n_id, theirs[node_type].n_id)
        for edge_type in data.edge_types:
            mine, want = ours[edge_type], theirs[edge_type]
            assert "edge_index" not in mine and mine.adj_t.layout == layout
            shape = (ours[edge_type[2]].n_id.numel(), ours[edge_type[0]].n_id.numel())
            merged = "e_id" not in want
            weight = torch.ones(want.edge_index.shape[1]) if merged else reference[edge_type].weight[want.e_id]
            dense = torch.sparse_coo_tensor(want.edge_index.flip(0), weight, shape).to_dense()
            torch.testing.assert_close(mine.adj_t.to_dense(), dense)
            if not merged:
                assert torch.equal(mine.e_id, want.e_id)
                if "edge_attr" in want:
                    assert torch.equal(mine.edge_attr, want.edge_attr)
    both = next(iter(NeighborLoader(kept, [3, 2], **kwargs)))
    assert all("edge_index" in both[et] and "adj_t" in both[et] for et in data.edge_types)
