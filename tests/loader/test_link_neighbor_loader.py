"""LinkNeighborLoader against independent references: each batch a neighbour sample (checked from the graph's
edge list) around the seed edges' endpoints, the supervision tensors mapping back to the seed edges and
negatives, PyG's own edge_sample given the same seeds and negatives, labels as PyG makes them, awkward
inputs, reproducibility, and every unsupported or bad argument named."""

from __future__ import annotations

import sys

import pytest
import torch

from featgraph import Graph
from featgraph.loader import Batch, LinkNeighborLoader
from featgraph.loader.neighbor_loader import pyg_data_class
from tests.loader.reference import check_flat_batch

torch_geometric = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402

NUM_NODES, NUM_EDGES = 120, 600


@pytest.fixture(scope="module")
def data() -> Data:
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=gen)
    return Data(
        x=torch.arange(NUM_NODES) * 10,
        edge_index=edge_index,
        edge_attr=torch.arange(NUM_EDGES) * 100,
        edge_label_index=torch.zeros(2, 3, dtype=torch.int64),  # the data's own: replaced in every batch
    )


def graph_of(data: Data) -> Graph:
    return Graph(data.edge_index[0], data.edge_index[1], data.num_nodes)


def seed_edges(count: int, seed: int = 1) -> torch.Tensor:
    """Seed edges that need not be graph edges."""
    return torch.randint(0, NUM_NODES, (2, count), generator=torch.Generator().manual_seed(seed))


def check_sample(data: Data, batch, endpoints: torch.Tensor, fanouts: list[int]) -> None:
    """``batch`` is a directional sample around ``endpoints`` (every seed edge's and negative's ends), which
    lead ``n_id`` once each in ascending order, with the data's tensors gathered."""
    seeds = torch.unique(endpoints)
    assert batch.num_sampled_nodes[0] == seeds.numel()
    check_flat_batch(graph_of(data), batch, seeds, fanouts)
    assert torch.equal(batch.x, data.x[batch.n_id]) and torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])
    assert batch.num_nodes == batch.n_id.numel()


@pytest.mark.parametrize("amount, negatives", [(1, 20), (0.5, 10), (2.5, 50)])
def test_binary_batches_hold_the_seed_edges_then_random_pairs_labelled_zero(data, amount, negatives):
    edges = seed_edges(100)
    loader = LinkNeighborLoader(
        data, [4, 3], edge_label_index=edges, neg_sampling={"mode": "binary", "amount": amount}, batch_size=20, seed=2
    )
    batches = list(loader)
    assert len(loader) == len(batches) == 5
    for batch in batches:
        assert isinstance(batch, Data) and batch.edge_label_index.shape == (2, 20 + negatives)
        ends = batch.n_id[batch.edge_label_index]
        assert torch.equal(ends[:, :20], edges[:, batch.input_id])
        check_sample(data, batch, ends.flatten(), [4, 3])
        assert batch.edge_label.dtype == torch.float32
        assert torch.equal(batch.edge_label, torch.cat([torch.ones(20), torch.zeros(negatives)]))
        assert not hasattr(batch, "batch_size")
    negative_ends = torch.cat([b.n_id[b.edge_label_index[:, 20:]] for b in batches], dim=1)
    assert torch.unique(negative_ends[0]).numel() > 30 and torch.unique(negative_ends[1]).numel() > 30
    assert torch.equal(torch.sort(torch.cat([b.input_id for b in batches])).values, torch.arange(100))


@pytest.mark.parametrize("amount", [1, 3])
def test_triplet_batches_say_where_each_source_and_its_positive_and_negative_destinations_are(data, amount):
    edges = seed_edges(60)
    neg_sampling = "triplet" if amount == 1 else {"mode": "triplet", "amount": amount}
    loader = LinkNeighborLoader(
        data, [3], edge_label_index=edges, neg_sampling=neg_sampling, batch_size=16, shuffle=False, seed=4
    )
    batches = list(loader)
    assert [b.input_id.numel() for b in batches] == [16, 16, 16, 12]
    for batch in batches:
        size = batch.input_id.numel()
        assert "edge_label_index" not in batch and "edge_label" not in batch
        assert torch.equal(batch.n_id[batch.src_index], edges[0, batch.input_id])
        assert torch.equal(batch.n_id[batch.dst_pos_index], edges[1, batch.input_id])
        assert batch.dst_neg_index.shape == ((size,) if amount == 1 else (size, amount))
        ends = torch.cat([batch.src_index, batch.dst_pos_index, batch.dst_neg_index.flatten()])
        check_sample(data, batch, batch.n_id[ends], [3])


def test_seeds_and_supervision_match_pyg_s_edge_sample_given_the_same_negatives(data):
    """Weights on one vertex each make the negatives certain, so PyG's own edge_sample (with a sampler that
    returns its seeds) gives what the batch must hold."""
    from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, SamplerOutput
    from torch_geometric.sampler.neighbor_sampler import edge_sample

    def seeds_only(seed, seed_time):
        return SamplerOutput(seed, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), None)

    src_weight, dst_weight = torch.zeros(NUM_NODES), torch.zeros(NUM_NODES)
    src_weight[7], dst_weight[93] = 1.0, 1.0
    edges = seed_edges(30, seed=5)
    for mode, amount in (("binary", 1.5), ("triplet", 2)):
        config = NegativeSampling(mode, amount, src_weight=src_weight, dst_weight=dst_weight)
        loader = LinkNeighborLoader(data, [2], edge_label_index=edges, neg_sampling=config, batch_size=30, seed=0)
        batch = loader(torch.arange(30))
        inputs = EdgeSamplerInput(torch.arange(30), edges[0], edges[1])
        expected = edge_sample(inputs, seeds_only, NUM_NODES, False, neg_sampling=config)
        assert torch.equal(batch.n_id[: batch.num_sampled_nodes[0]], expected.node)
        if mode == "binary":
            _, edge_label_index, edge_label, _ = expected.metadata
            assert torch.equal(batch.edge_label_index, edge_label_index)
            assert torch.equal(batch.edge_label, edge_label)
        else:
            _, src_index, dst_pos_index, dst_neg_index, _ = expected.metadata
            assert torch.equal(batch.src_index, src_index) and torch.equal(batch.dst_pos_index, dst_pos_index)
            assert torch.equal(batch.dst_neg_index, dst_neg_index)


def test_without_negatives_the_batch_holds_the_seed_edges_and_their_labels_as_given(data):
    edges = seed_edges(40)
    labels = torch.arange(40) % 3
    unlabelled = next(iter(LinkNeighborLoader(data, [2], edge_label_index=edges, batch_size=40, seed=0)))
    assert torch.equal(unlabelled.n_id[unlabelled.edge_label_index], edges[:, unlabelled.input_id])
    assert "edge_label" not in unlabelled
    labelled = next(iter(LinkNeighborLoader(data, [2], edge_label_index=edges, edge_label=labels, batch_size=40)))
    assert torch.equal(labelled.edge_label, labels[labelled.input_id])  # no negatives: not shifted


@pytest.mark.parametrize(
    "labels, shifted",
    [(torch.arange(40) % 3, True), (torch.ones(40, dtype=torch.long), False), (torch.rand(40) + 1, False)],
    ids=["from-0", "from-1", "float"],
)
def test_binary_negatives_keep_zero_for_themselves_shifting_labels_that_start_at_zero(data, labels, shifted):
    loader = LinkNeighborLoader(
        data, [2], edge_label_index=seed_edges(40), edge_label=labels, neg_sampling_ratio=1.0, batch_size=10
    )
    for batch in loader:
        assert batch.edge_label.dtype == labels.dtype
        expected = labels[batch.input_id] + int(shifted)
        assert torch.equal(batch.edge_label, torch.cat([expected, torch.zeros_like(expected)]))


def test_by_default_every_edge_of_the_graph_is_a_seed_edge_once(data):
    loader = LinkNeighborLoader(data, [3, 3], batch_size=128, seed=1)
    batches = list(loader)
    assert len(batches) == 5
    positions = torch.cat([b.input_id for b in batches])
    assert torch.equal(torch.sort(positions).values, torch.arange(NUM_EDGES))
    for batch in batches:
        ends = batch.n_id[batch.edge_label_index]
        assert torch.equal(ends, data.edge_index[:, batch.input_id])
        check_sample(data, batch, ends.flatten(), [3, 3])
    assert torch.equal(loader.edge_label_index, data.edge_index)


def test_bidirectional_batches_hold_each_sampled_edge_both_ways_once(data):
    def loader(subgraph_type: str) -> LinkNeighborLoader:
        return LinkNeighborLoader(
            data, [3, 2], edge_label_index=seed_edges(50), batch_size=25, subgraph_type=subgraph_type, seed=6
        )

    for directed, both in zip(loader("directional"), loader("bidirectional"), strict=True):
        assert torch.equal(directed.n_id, both.n_id) and "num_sampled_nodes" not in both
        pairs = set(map(tuple, directed.edge_index.t().tolist()))
        expected = sorted(pairs | {(v, u) for u, v in pairs}, key=lambda pair: (pair[1], pair[0]))
        assert list(map(tuple, both.edge_index.t().tolist())) == expected
        src, dst = data.edge_index[:, both.e_id]
        forward = torch.equal(both.n_id[both.edge_index[0]], src) and torch.equal(both.n_id[both.edge_index[1]], dst)
        ends = both.n_id[both.edge_index]
        assert not forward  # some edges only reversed
        assert bool((((ends[0] == src) & (ends[1] == dst)) | ((ends[0] == dst) & (ends[1] == src))).all())
        assert torch.equal(both.edge_attr, data.edge_attr[both.e_id])


def test_the_same_seed_gives_the_same_batches_and_negatives_whatever_the_prefetching(data):
    def epoch(seed: int, prefetch: int, num_workers: int) -> list[tuple[torch.Tensor, ...]]:
        loader = LinkNeighborLoader(
            data, [4, 2], edge_label_index=seed_edges(90), neg_sampling="binary", batch_size=30, seed=seed,
            prefetch=prefetch, num_workers=num_workers,
        )  # fmt: skip
        return [(b.input_id, b.n_id, b.e_id, b.n_id[b.edge_label_index]) for b in loader]

    def same(a, b) -> bool:
        return all(torch.equal(x, y) for p, q in zip(a, b, strict=True) for x, y in zip(p, q, strict=True))

    first = epoch(3, 0, 1)
    assert same(first, epoch(3, 2, 2)) and not same(first, epoch(4, 0, 1))


def test_duplicate_seed_edges_self_loops_and_isolated_vertices():
    # vertex 5 is isolated; (0, 1) is a seed edge twice, (2, 2) a self loop, (4, 5) no edge of the graph
    graph = Graph(torch.tensor([0, 1, 2, 2, 3]), torch.tensor([1, 2, 2, 3, 0]), 6)
    edges = torch.tensor([[0, 0, 2, 4], [1, 1, 2, 5]])
    batch = LinkNeighborLoader(graph, [-1, -1], edge_label_index=edges, batch_size=4, shuffle=False, seed=0)(
        [0, 1, 2, 3]
    )
    assert torch.equal(batch.n_id[batch.edge_label_index], edges)
    assert batch.n_id[:5].tolist() == [0, 1, 2, 4, 5] and batch.num_sampled_nodes[0] == 5
    check_flat_batch(graph, batch, torch.tensor([0, 1, 2, 4, 5]), [-1, -1])
    local_5 = int((batch.n_id == 5).nonzero())
    assert not bool((batch.edge_index == local_5).any())


def test_an_empty_edge_label_index_gives_an_empty_epoch(data):
    loader = LinkNeighborLoader(data, [2], edge_label_index=torch.zeros(2, 0, dtype=torch.int64))
    assert len(loader) == 0 and list(loader) == []


def test_negative_weights_draw_only_weighted_vertices(data):
    dst_weight = torch.zeros(NUM_NODES)
    dst_weight[[3, 50]] = 1.0
    loader = LinkNeighborLoader(
        data, [2], edge_label_index=seed_edges(40), neg_sampling={"mode": "triplet", "amount": 2,
        "dst_weight": dst_weight}, batch_size=40, seed=0,
    )  # fmt: skip
    batch = next(iter(loader))
    assert set(batch.n_id[batch.dst_neg_index].flatten().tolist()) == {3, 50}


def test_a_call_with_positions_a_transform_and_repr(data):
    loader = LinkNeighborLoader(
        data, [2], edge_label_index=seed_edges(30), batch_size=10, transform=lambda b: (b, "seen")
    )
    batch, mark = loader([5, 2])
    assert mark == "seen" and torch.equal(batch.input_id, torch.tensor([5, 2]))
    assert torch.equal(batch.n_id[batch.edge_label_index], seed_edges(30)[:, [5, 2]])
    assert repr(loader) == "LinkNeighborLoader()"


def test_without_pyg_a_batch_is_featgraph_s_with_the_same_names(data, monkeypatch):
    for module in ("torch_geometric", "torch_geometric.data"):
        monkeypatch.setitem(sys.modules, module, None)
    pyg_data_class.cache_clear()
    try:
        graph = graph_of(data)
        batch = next(iter(LinkNeighborLoader(graph, [2], neg_sampling="binary", batch_size=16, seed=0)))
    finally:
        pyg_data_class.cache_clear()
    assert type(batch) is Batch and batch.edge_label.shape == (32,)
    assert torch.equal(batch.n_id[batch.edge_label_index[:, :16]], data.edge_index[:, batch.input_id])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"edge_label_time": torch.zeros(600)}, ValueError, "'edge_label_time' is set while 'time_attr' is not"),
        ({"time_attr": "x"}, ValueError, "'edge_label_time' is not set while 'time_attr' is set"),
        ({"time_attr": "time", "edge_label_time": torch.zeros(600)}, ValueError, "time_attr 'time' names no"),
        ({"time_attr": 3, "edge_label_time": torch.zeros(600)}, TypeError, "time_attr must name"),
        ({"temporal_strategy": "last"}, ValueError, "temporal_strategy is given .* without time_attr"),
        (
            {"time_attr": "x", "edge_label_time": torch.zeros(600), "temporal_strategy": "first"},
            ValueError,
            "temporal_strategy must be one of",
        ),
        ({"time_attr": "x", "edge_label_time": torch.zeros(5)}, ValueError, r"edge_label_time must hold one time"),
        (
            {"time_attr": "x", "edge_label_time": torch.zeros(600), "replace": True},
            ValueError,
            "replace is given with time_attr",
        ),
        ({"disjoint": "yes"}, TypeError, "disjoint must be a bool"),
        ({"directed": False}, ValueError, "directed is given: directed=False"),
        (
            {"subgraph_type": "induced"},
            ValueError,
            r"subgraph_type must be .* \(the induced subgraph is not supported\)",
        ),
        ({"transform_sampler_output": abs}, ValueError, "transform_sampler_output is given"),
        ({"neighbor_sampler": object()}, ValueError, "neighbor_sampler is given"),
        ({"persistent_workers": True}, TypeError, "persistent_workers"),
        ({"collate_fn": list}, TypeError, "collate_fn"),
        ({"is_sorted": 1}, TypeError, "is_sorted must be a bool"),
        ({"filter_per_worker": "yes"}, TypeError, "filter_per_worker must be a bool"),
        ({"transform": 3}, TypeError, "transform must be callable"),
        ({"edge_label_index": torch.zeros(3, 4, dtype=torch.long)}, ValueError, r"shape \(2, N\), got \(3, 4\)"),
        ({"edge_label_index": torch.tensor([[0], [120]])}, ValueError, "edge_label_index holds vertex id 120, out"),
        ({"edge_label_index": torch.tensor([[-1], [0]])}, ValueError, "edge_label_index holds vertex id -1"),
        ({"edge_label_index": torch.zeros(2, 2)}, TypeError, "edge_label_index must hold integer vertex ids"),
        ({"edge_label_index": ("paper", "to", "paper")}, TypeError, "edge_label_index as an edge type"),
        ({"edge_label": torch.ones(5)}, ValueError, r"edge_label must have one entry per seed edge \(600\)"),
        ({"edge_label": torch.ones(600), "neg_sampling": "triplet"}, ValueError, "edge_label must be None with trip"),
        ({"neg_sampling": {"mode": "binary", "amount": 0}}, ValueError, "neg_sampling amount must be a positive"),
        ({"neg_sampling_ratio": -0.5}, ValueError, "neg_sampling amount must be a positive number, got -0.5"),
        ({"neg_sampling": "binary", "neg_sampling_ratio": 2.0}, ValueError, "not both"),
        ({"weight_attr": "w"}, ValueError, "weight_attr 'w' names no per-edge tensor"),
        ({"num_neighbors": [2.5]}, ValueError, "num_neighbors must hold"),
        ({"batch_size": 0}, ValueError, "batch_size must be an int >= 1"),
    ],
)
def test_unsupported_and_bad_arguments_are_named(data, kwargs, error, message):
    kwargs = {"num_neighbors": [2], **kwargs}
    with pytest.raises(error, match=message):
        LinkNeighborLoader(data, **kwargs)


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_temporal_batches_sample_each_endpoints_past_and_negatives_no_later(mode):
    gen = torch.Generator().manual_seed(3)
    data = Data(
        x=torch.arange(NUM_NODES), edge_index=torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=gen),
        time=torch.randint(0, 50, (NUM_NODES,), generator=gen),
    )  # fmt: skip
    ends_time = torch.maximum(data.time[data.edge_index[0]], data.time[data.edge_index[1]])
    label_time = ends_time + torch.randint(0, 10, (NUM_EDGES,), generator=gen)  # no seed edge before its ends
    loader = LinkNeighborLoader(
        data, [3, 2], time_attr="time", edge_label_time=label_time, neg_sampling=dict(mode=mode, amount=2),
        batch_size=16, shuffle=True, seed=0,
    )  # fmt: skip
    graph = graph_of(data)
    for batch in loader:
        times = label_time[batch.input_id]
        positives = batch.input_id.numel()
        assert bool((batch.time <= times[batch.batch]).all())  # PyG's check: nothing later than the seed edge
        ends = (6 if mode == "binary" else 4) * positives  # every endpoint its own subgraph, seeds first
        assert torch.equal(batch.batch[:ends], torch.arange(ends) % positives)
        src, dst = graph.coo()
        assert torch.equal(src[batch.e_id], batch.n_id[batch.edge_index[0]])
        assert torch.equal(dst[batch.e_id], batch.n_id[batch.edge_index[1]])
        assert torch.equal(batch.batch[batch.edge_index[0]], batch.batch[batch.edge_index[1]])
        if mode == "binary":
            assert torch.equal(batch.edge_label_time, times.repeat(3))
            negatives = batch.n_id[batch.edge_label_index[:, positives:]]
            assert bool((data.time[negatives] <= batch.edge_label_time[positives:]).all())
            assert torch.equal(batch.n_id[batch.edge_label_index[:, :positives]], data.edge_index[:, batch.input_id])
        else:
            assert torch.equal(batch.seed_time, times)
            assert bool((data.time[batch.n_id[batch.dst_neg_index]] <= times.view(-1, 1)).all())
            assert torch.equal(batch.n_id[batch.src_index], data.edge_index[0, batch.input_id])


def typed_link_data(seed: int = 0):
    from torch_geometric.data import HeteroData

    gen = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data["paper"].x = torch.arange(50)
    data["paper"].time = torch.randint(0, 30, (50,), generator=gen)
    data["author"].x = torch.arange(100, 130)
    data["author"].time = torch.randint(0, 30, (30,), generator=gen)
    writes = torch.stack([torch.randint(0, 30, (120,), generator=gen), torch.randint(0, 50, (120,), generator=gen)])
    data["author", "writes", "paper"].edge_index = writes
    data["author", "writes", "paper"].edge_attr = torch.arange(120) * 10
    data["paper", "rev_writes", "author"].edge_index = writes.flip(0)
    data["paper", "cites", "paper"].edge_index = torch.randint(0, 50, (2, 200), generator=gen)
    return data


def check_typed_link_batch(data, batch, edge_type) -> None:
    """Every sampled edge is the data's edge e_id between the vertices its ends stand for, values sliced."""
    for et in data.edge_types:
        src_type, _, dst_type = et
        if "e_id" not in batch[et]:
            continue
        ends = torch.stack(
            [batch[src_type].n_id[batch[et].edge_index[0]], batch[dst_type].n_id[batch[et].edge_index[1]]]
        )
        assert torch.equal(ends, data[et].edge_index[:, batch[et].e_id])
    for node_type in data.node_types:
        assert torch.equal(batch[node_type].x, data[node_type].x[batch[node_type].n_id])
    assert batch.input_type == edge_type


@pytest.mark.parametrize("mode", [None, "binary", "triplet"])
@pytest.mark.parametrize("edge_type", [("author", "writes", "paper"), ("paper", "cites", "paper")])
def test_typed_batches_hold_the_seed_edges_of_one_edge_type(edge_type, mode):
    data = typed_link_data()
    loader = LinkNeighborLoader(
        data, [3, 2], edge_label_index=edge_type[::2] if edge_type[1] == "writes" else edge_type, batch_size=16,
        neg_sampling=None if mode is None else dict(mode=mode, amount=2), shuffle=True, seed=0,
    )  # fmt: skip
    assert repr(loader) == "LinkNeighborLoader()"
    src_type, _, dst_type = edge_type
    seen = []
    for batch in loader:
        check_typed_link_batch(data, batch, edge_type)
        positions = batch[edge_type].input_id
        seen.append(positions)
        seeds = data[edge_type].edge_index[:, positions]
        src_ids, dst_ids = batch[src_type].n_id, batch[dst_type].n_id
        if mode == "triplet":
            assert torch.equal(src_ids[batch[src_type].src_index], seeds[0])
            assert torch.equal(dst_ids[batch[dst_type].dst_pos_index], seeds[1])
            assert batch[dst_type].dst_neg_index.shape == (positions.numel(), 2)
        else:
            label_index = batch[edge_type].edge_label_index
            got = torch.stack([src_ids[label_index[0]], dst_ids[label_index[1]]])
            assert torch.equal(got[:, : positions.numel()], seeds)
            if mode == "binary":
                assert torch.equal(
                    batch[edge_type].edge_label,
                    torch.cat([torch.ones(positions.numel()), torch.zeros(2 * positions.numel())]),
                )
            else:
                assert "edge_label" not in batch[edge_type]
        if src_type != dst_type:  # each type's seeds lead its n_id, each once, ascending
            used = batch[edge_type].edge_label_index[0] if mode != "triplet" else batch[src_type].src_index
            assert torch.equal(torch.unique(src_ids[used]), src_ids[: torch.unique(used).numel()])
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.arange(data[edge_type].num_edges))


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_typed_temporal_and_disjoint_batches_give_each_endpoint_its_subgraph(mode):
    data = typed_link_data()
    edge_type = ("author", "writes", "paper")
    ends = torch.maximum(
        data["author"].time[data[edge_type].edge_index[0]], data["paper"].time[data[edge_type].edge_index[1]]
    )
    for temporal in (True, False):
        options = dict(time_attr="time", edge_label_time=ends + 3) if temporal else dict(disjoint=True)
        loader = LinkNeighborLoader(
            data, [2, 2], edge_label_index=edge_type, batch_size=8, neg_sampling=dict(mode=mode, amount=1), seed=0,
            **options,
        )  # fmt: skip
        for batch in loader:
            check_typed_link_batch(data, batch, edge_type)
            positions = batch[edge_type].input_id
            for node_type in ("author", "paper"):  # each vertex under one seed edge
                assert int(batch[node_type].batch.max()) < positions.numel()
            if temporal:
                limit = (ends + 3)[positions]
                for node_type, skip in (("author", 2 * 8 if mode == "binary" else 8), ("paper", 2 * 8)):
                    store = batch[node_type]  # past the seeds, nothing later than the seed edge
                    assert bool((store.time[skip:] <= limit[store.batch[skip:]]).all())
                if mode == "binary":
                    assert torch.equal(batch[edge_type].edge_label_time, limit.repeat(2))
                else:
                    assert torch.equal(batch["paper"].seed_time, limit)


def test_typed_link_arguments_are_named():
    data = typed_link_data()
    cases = [
        ({"edge_label_index": ("paper", "nothing")}, ValueError, "0 edge types from 'paper' to 'nothing'"),
        ({"edge_label_index": (("paper", "nothing"), torch.zeros(2, 1, dtype=torch.long))}, KeyError,
         "unknown node type 'nothing'"),
        ({"edge_label_index": ("author", "reads", "paper")}, ValueError, "unknown edge type"),
        ({"edge_label_index": 3}, TypeError, "an edge type or \\(edge type"),
        ({"edge_label_index": (("author", "writes", "paper"), torch.tensor([[30], [0]]))}, ValueError,
         "'author' id 30, out of range"),
        ({"edge_label_index": ("author", "writes", "paper"), "time_attr": "time"}, ValueError,
         "'edge_label_time' is not set"),
        ({"edge_label_index": ("author", "writes", "paper"), "time_attr": "time", "replace": True,
          "edge_label_time": torch.zeros(120)}, ValueError, "replace is given with time_attr"),
    ]  # fmt: skip
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            LinkNeighborLoader(data, [2], batch_size=4, **kwargs)
