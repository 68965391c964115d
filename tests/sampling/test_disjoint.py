"""DisjointSampler against a brute-force walk of each seed's subgraph: every sampled edge allowed (by the seed's
time, by a positive weight), all of them with fan-out -1, the fan-out's count or every allowed one per vertex
otherwise, the latest under "last", draws by weight and with replacement; PyG's disjoint layout; node- and
edge-level times; reproducibility; named errors."""

from __future__ import annotations

import pytest
import torch

from featgraph import Graph
from featgraph.sampling.disjoint import DisjointSampler

N = 30


def graph(seed: int = 0, edges: int = 150) -> Graph:
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, N, (edges,), generator=gen), torch.randint(0, N - 2, (edges,), generator=gen)
    src = torch.cat([src, src[:5], torch.arange(3)])  # duplicate edges and self loops; the last two isolated
    dst = torch.cat([dst, dst[:5], torch.arange(3)])
    return Graph(src, dst, N)


def allowed_in_edges(g: Graph, vertex: int, limit, node_time, edge_time) -> set[int]:
    """User edge ids into ``vertex`` whose source (node time) or own (edge time) time is at most ``limit``."""
    src, dst = g.coo()
    out = set()
    for e in torch.nonzero(dst == vertex).flatten().tolist():
        when = node_time[src[e]] if node_time is not None else edge_time[e]
        if when <= limit:
            out.add(e)
    return out


def check(g: Graph, batch, seeds, times, fanouts, node_time=None, edge_time=None) -> None:
    """The batch's layout, and each subgraph a valid sample of its seed's past."""
    count = seeds.numel()
    src, dst = g.coo()
    assert torch.equal(batch.n_id[:count], seeds) and torch.equal(batch.batch[:count], torch.arange(count))
    assert torch.equal(batch.batch[count:], torch.sort(batch.batch[count:]).values)  # then subgraph by subgraph
    assert torch.equal(batch.batch[batch.edge_index[0]], batch.batch[batch.edge_index[1]])
    assert torch.equal(batch.batch[batch.edge_index[1]], torch.sort(batch.batch[batch.edge_index[1]]).values)
    # each edge is the graph edge e_id between the vertices its ends stand for
    assert torch.equal(src[batch.e_id], batch.n_id[batch.edge_index[0]])
    assert torch.equal(dst[batch.e_id], batch.n_id[batch.edge_index[1]])
    for s in range(count):
        mine = torch.nonzero(batch.batch == s).flatten()
        assert batch.n_id[mine].unique().numel() == mine.numel()  # a vertex once per subgraph
        edges = (batch.batch[batch.edge_index[1]] == s).nonzero().flatten()
        expanded = {int(seeds[s])}
        frontier = [int(seeds[s])]
        for fanout in fanouts:  # replay the hops: each frontier vertex drew from its allowed in-edges
            reached = []
            for v in frontier:
                drawn = [int(batch.e_id[i]) for i in edges if int(batch.n_id[batch.edge_index[1, i]]) == v]
                allowed = allowed_in_edges(g, v, times[s], node_time, edge_time)
                assert set(drawn) <= allowed
                want = len(allowed) if fanout < 0 else min(fanout, len(allowed))
                assert len(drawn) == want
                reached += [int(src[e]) for e in drawn if int(src[e]) not in expanded]
                expanded.update(int(src[e]) for e in drawn)
            frontier = list(dict.fromkeys(reached))
        assert set(batch.n_id[mine].tolist()) == expanded


@pytest.mark.parametrize("fanouts", [[-1], [3, 2], [-1, -1], [1, 1, 1]])
@pytest.mark.parametrize("level", ["node", "edge"])
def test_each_subgraph_samples_its_seed_s_past(fanouts, level):
    g = graph()
    gen = torch.Generator().manual_seed(1)
    node_time = torch.randint(0, 10, (N,), generator=gen) if level == "node" else None
    edge_time = torch.randint(0, 10, (g.num_edges,), generator=gen) if level == "edge" else None
    sampler = DisjointSampler(g, fanouts, node_time=node_time, edge_time=edge_time)
    seeds = torch.tensor([0, 5, 5, 28, 29, 7])  # repeats, an isolated vertex
    times = torch.tensor([9, 4, 9, 9, 3, 0])
    batch = sampler.sample(seeds, times, seed=3)
    check(g, batch, seeds, times, fanouts, node_time, edge_time)


def test_last_takes_the_latest_allowed_in_edges():
    src = torch.tensor([1, 2, 3, 4, 5])
    g = Graph(src, torch.zeros(5, dtype=torch.int64), 6)
    node_time = torch.tensor([0, 5, 1, 3, 9, 2])
    sampler = DisjointSampler(g, [2], node_time=node_time, strategy="last")
    batch = sampler.sample(torch.tensor([0]), torch.tensor([4]), 0)
    assert set(batch.n_id[1:].tolist()) == {3, 5}  # allowed: 2 (1), 3 (3), 5 (2); the latest two: 3 and 5


def test_the_same_seed_gives_the_same_batch_and_another_seed_another():
    g = graph()
    sampler = DisjointSampler(g, [2, 2], node_time=torch.zeros(N))
    seeds, times = torch.arange(10), torch.zeros(10)
    a, b, c = (sampler.sample(seeds, times, s) for s in (4, 4, 5))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a.e_id, c.e_id)


def test_no_seeds_and_no_hops():
    g = graph()
    sampler = DisjointSampler(g, [], node_time=torch.zeros(N))
    batch = sampler.sample(torch.tensor([3, 4]), torch.zeros(2), 0)
    assert batch.n_id.tolist() == [3, 4] and batch.edge_index.shape == (2, 0)
    empty = DisjointSampler(g, [2], node_time=torch.zeros(N)).sample(torch.zeros(0, dtype=torch.int64), [], 0)
    assert empty.n_id.numel() == 0 and empty.edge_index.shape == (2, 0)


def test_bad_arguments_are_named():
    g = graph()
    with pytest.raises(ValueError, match="node_time or edge_time, not both"):
        DisjointSampler(g, [2], node_time=torch.zeros(N), edge_time=torch.zeros(g.num_edges))
    with pytest.raises(ValueError, match="weight and replace draw without times"):
        DisjointSampler(g, [2], node_time=torch.zeros(N), replace=True)
    with pytest.raises(ValueError, match="seed_time: one time per seed with a timed sampler, none without"):
        DisjointSampler(g, [2]).sample(torch.tensor([0]), torch.zeros(1), 0)
    with pytest.raises(ValueError, match="weight holds negative values"):
        DisjointSampler(g, [2], weight=-torch.ones(g.num_edges))
    with pytest.raises(ValueError, match="temporal_strategy must be one of"):
        DisjointSampler(g, [2], node_time=torch.zeros(N), strategy="first")
    with pytest.raises(ValueError, match=r"node_time must hold one time per entry, shape \(30,\)"):
        DisjointSampler(g, [2], node_time=torch.zeros(3))
    with pytest.raises(ValueError, match="edge_time holds non-finite"):
        DisjointSampler(g, [2], edge_time=torch.full((g.num_edges,), float("nan")))
    with pytest.raises(TypeError, match="node_time must hold real times"):
        DisjointSampler(g, [2], node_time=torch.zeros(N, dtype=torch.bool))
    sampler = DisjointSampler(g, [2], edge_time=torch.zeros(g.num_edges))
    with pytest.raises(ValueError, match="input_time is required with edge-level times"):
        sampler.seed_times(torch.tensor([0]))
    with pytest.raises(ValueError, match="seed_time must hold one time per entry"):
        sampler.sample(torch.tensor([0, 1]), torch.zeros(3), 0)
    with pytest.raises(ValueError, match="out of range"):
        sampler.sample(torch.tensor([N]), torch.zeros(1), 0)


def test_a_fan_out_per_relation_and_vertices_numbered_in_time_order():
    g = graph(edges=200)
    relation = torch.arange(g.num_edges) % 2
    node_time = torch.randperm(N, generator=torch.Generator().manual_seed(2))
    sampler = DisjointSampler(g, [[1, -1]], node_time=node_time, relation=relation)
    seeds, times = torch.arange(10), torch.full((10,), N)  # every vertex allowed
    batch = sampler.sample(seeds, times, seed=0)
    src, dst = g.coo()
    for s in range(10):
        mine = batch.e_id[batch.batch[batch.edge_index[1]] == s]
        assert int((relation[mine] == 0).sum()) == min(1, int(((dst == s) & (relation == 0)).sum()))
        assert int((relation[mine] == 1).sum()) == int(((dst == s) & (relation == 1)).sum())
        reached = batch.n_id[(batch.batch == s).nonzero().flatten()[1:]]  # one hop: its vertices in time order
        assert torch.equal(node_time[reached], torch.sort(node_time[reached]).values)
    with pytest.raises(ValueError, match="one fan-out per relation"):
        DisjointSampler(g, [[1]], node_time=node_time, relation=relation)


def test_without_times_each_seed_samples_its_own_subgraph_even_when_repeated():
    """A seed given twice gets two subgraphs, drawn independently; with every neighbour each is the same."""
    g = graph()
    seeds = torch.tensor([3, 8, 3, 29])
    for fanouts in ([-1, 2], [2, 2]):
        batch = DisjointSampler(g, fanouts).sample(seeds, None, seed=4)
        check(g, batch, seeds, torch.zeros(4), fanouts, node_time=torch.zeros(N))
    batch = DisjointSampler(g, [-1]).sample(seeds, seed=4)
    src, dst = g.coo()
    first = [set(batch.e_id[batch.batch[batch.edge_index[1]] == s].tolist()) for s in range(4)]
    assert first[0] == first[2] == set((dst == 3).nonzero().flatten().tolist()) and first[3] == set()


def test_weights_draw_in_proportion_and_never_a_zero_weight_edge():
    src = torch.cat([torch.arange(1, 5), torch.arange(1, 5)])
    g = Graph(src, torch.zeros(8, dtype=torch.int64), 5)  # vertex 0's in-edges: 1..4, each twice
    weight = torch.tensor([0.0, 1.0, 1.0, 16.0, 0.0, 0.0, 0.0, 0.0])  # only edges 1, 2 and 3 may be drawn
    seeds = torch.zeros(2000, dtype=torch.int64)
    drawn = DisjointSampler(g, [1], weight=weight).sample(seeds, seed=0).e_id
    assert set(drawn.tolist()) <= {1, 2, 3} and drawn.numel() == 2000
    assert 0.8 < float((drawn == 3).float().mean()) < 0.97  # 16 / 18 = 0.89
    every = DisjointSampler(g, [-1], weight=weight).sample(torch.zeros(1, dtype=torch.int64), seed=0).e_id
    assert sorted(every.tolist()) == [1, 2, 3]
    without = DisjointSampler(g, [2], weight=weight).sample(seeds[:50], seed=1)
    for s in range(50):  # two distinct edges each, without replacement
        mine = without.e_id[without.batch[without.edge_index[1]] == s]
        assert mine.numel() == 2 and mine.unique().numel() == 2


@pytest.mark.parametrize("weighted", [False, True])
def test_with_replacement_each_vertex_draws_its_fan_out(weighted):
    g = graph()
    weight = torch.rand(g.num_edges, generator=torch.Generator().manual_seed(5)) if weighted else None
    sampler = DisjointSampler(g, [5, -1], weight=weight, replace=True)
    seeds = torch.arange(10)
    batch = sampler.sample(seeds, seed=2)
    src, dst = g.coo()
    assert torch.equal(src[batch.e_id], batch.n_id[batch.edge_index[0]])
    assert torch.equal(dst[batch.e_id], batch.n_id[batch.edge_index[1]])
    for s in range(10):  # the seed's own draws: 5 with replacement where it has in-edges
        mine = batch.e_id[(batch.batch[batch.edge_index[1]] == s) & (batch.edge_index[1] == s)]
        assert mine.numel() == (5 if int((dst == s).sum()) else 0)
        assert set(mine.tolist()) <= set((dst == s).nonzero().flatten().tolist())
