"""HeteroNeighborSampler against an independent reference: every sampled edge is an edge of its type, each
expanded vertex draws min(fan-out, its in-degree of that type) per edge type, hop by hop from the vertices the
previous hop reached, and with every neighbour taken the batch is the typed k-hop neighbourhood a plain
breadth-first search finds."""

from __future__ import annotations

import pytest
import torch

from featgraph.graph import HeteroGraph
from featgraph.sampling import HeteroNeighborSampler

PAPERS, AUTHORS, VENUES = 60, 35, 5


def typed_edges(seed: int = 0, skewed: bool = False) -> dict:
    """Papers citing papers (duplicates and self loops included), authors writing papers and the reverse,
    papers in venues (bipartite, one hub venue when ``skewed``); a node type with no edges."""
    gen = torch.Generator().manual_seed(seed)
    writes = torch.stack(
        [torch.randint(0, AUTHORS, (180,), generator=gen), torch.randint(0, PAPERS, (180,), generator=gen)]
    )
    cites = torch.randint(0, PAPERS, (2, 250), generator=gen)
    cites = torch.cat([cites, cites[:, :20], torch.arange(5).repeat(2, 1)], dim=1)
    venue = torch.randint(0, VENUES, (PAPERS,), generator=gen)
    if skewed:
        venue[: PAPERS * 3 // 4] = 0
    return {
        ("paper", "cites", "paper"): cites,
        ("author", "writes", "paper"): writes,
        ("paper", "written_by", "author"): writes.flip(0),
        ("paper", "in", "venue"): torch.stack([torch.arange(PAPERS), venue]),
        ("venue", "has", "paper"): torch.stack([venue, torch.arange(PAPERS)]),
    }


def hetero(edges: dict) -> HeteroGraph:
    return HeteroGraph(edges, {"paper": PAPERS, "author": AUTHORS, "venue": VENUES, "lonely": 3})


def check_edges(batch, edges: dict, distinct: bool = True) -> None:
    """Every batch edge is the input edge its e_id names, in the two types' batch ids (each once unless drawn
    with replacement)."""
    for edge_type, index in batch.edge_index.items():
        src_type, _, dst_type = edge_type
        original = edges[edge_type][:, batch.e_id[edge_type]]
        assert torch.equal(batch.n_id[src_type][index[0]], original[0])
        assert torch.equal(batch.n_id[dst_type][index[1]], original[1])
        if distinct:
            assert batch.e_id[edge_type].unique().numel() == batch.e_id[edge_type].numel()


def hop_ranges(batch) -> dict:
    """Per node type the batch-id range each hop reached (hop 0: the seeds)."""
    out = {}
    for node_type, counts in batch.num_sampled_nodes.items():
        ends = torch.tensor([0, *counts]).cumsum(0).tolist()
        out[node_type] = list(zip(ends[:-1], ends[1:], strict=True))
    return out


@pytest.mark.parametrize("fanouts", [[3, 2], [1, 1, 1], [0, 4]], ids=["3-2", "1-1-1", "0-4"])
@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
def test_each_vertex_draws_its_fanout_per_edge_type(fanouts: list[int], replace: bool) -> None:
    edges = typed_edges(skewed=True)
    graph = hetero(edges)
    batch = HeteroNeighborSampler(graph, fanouts, replace=replace).sample("paper", torch.tensor([3, 0, 41]), seed=7)
    check_edges(batch, edges, distinct=not replace)
    assert batch.n_id["paper"][:3].tolist() == [3, 0, 41]
    assert batch.batch_size == 3 and batch.input_type == "paper"
    ranges = hop_ranges(batch)
    for node_type, ids in batch.n_id.items():
        assert ids.unique().numel() == ids.numel()
        assert sum(batch.num_sampled_nodes[node_type]) == ids.numel()
        assert len(batch.num_sampled_nodes[node_type]) == len(fanouts) + 1
    for edge_type, index in batch.edge_index.items():
        src_type, _, dst_type = edge_type
        assert sum(batch.num_sampled_edges[edge_type]) == index.shape[1]
        offsets = torch.tensor([0, *batch.num_sampled_edges[edge_type]]).cumsum(0).tolist()
        degree = torch.bincount(edges[edge_type][1], minlength=graph.num_nodes_dict[dst_type])
        for hop, fanout in enumerate(fanouts):
            start, stop = ranges[dst_type][hop]
            dst = index[1, offsets[hop] : offsets[hop + 1]]
            drawn = torch.bincount(dst - start, minlength=stop - start) if dst.numel() else torch.zeros(stop - start)
            assert dst.numel() == 0 or (int(dst.min()) >= start and int(dst.max()) < stop)
            expected = degree[batch.n_id[dst_type][start:stop]]
            expected = torch.full_like(expected, fanout) * (expected > 0) if replace else expected.clamp(max=fanout)
            assert torch.equal(drawn.long(), expected), (edge_type, hop)
    assert batch.n_id["lonely"].numel() == 0


def breadth_first(edges: dict, seeds: torch.Tensor, hops: int) -> tuple[dict, set]:
    """The typed k-hop in-neighbourhood of the seeds (paper ids): vertices per type and edge ids per type."""
    reached = {"paper": set(seeds.tolist()), "author": set(), "venue": set(), "lonely": set()}
    frontier = {t: set(v) for t, v in reached.items()}
    taken = set()
    for _ in range(hops):
        new = {t: set() for t in reached}
        for edge_type, index in edges.items():
            src_type, _, dst_type = edge_type
            for e, (u, v) in enumerate(index.t().tolist()):
                if v in frontier[dst_type]:
                    taken.add((edge_type, e))
                    if u not in reached[src_type]:
                        new[src_type].add(u)
        for t in reached:
            reached[t] |= new[t]
        frontier = new
    return reached, taken


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_every_neighbour_gives_the_typed_k_hop_neighbourhood(hops: int) -> None:
    edges = typed_edges(seed=1)
    seeds = torch.tensor([7, 2, 19, 50])
    batch = HeteroNeighborSampler(hetero(edges), [-1] * hops).sample("paper", seeds, seed=0)
    reached, taken = breadth_first(edges, seeds, hops)
    assert {t: set(ids.tolist()) for t, ids in batch.n_id.items()} == reached
    assert {(et, e) for et, ids in batch.e_id.items() for e in ids.tolist()} == taken
    check_edges(batch, edges)


def test_per_edge_type_fanouts_as_a_dict() -> None:
    edges = typed_edges()
    graph = hetero(edges)
    fanouts = {et: [-1, 0] if et[1] == "writes" else [0, 0] for et in edges}
    batch = HeteroNeighborSampler(graph, fanouts).sample("paper", torch.arange(10), seed=3)
    check_edges(batch, edges)
    writes = ("author", "writes", "paper")
    expected = int(torch.isin(edges[writes][1], torch.arange(10)).sum())
    assert batch.num_sampled_edges[writes] == [expected, 0]
    assert all(sum(n) == 0 for et, n in batch.num_sampled_edges.items() if et != writes)
    assert batch.n_id["paper"].tolist() == list(range(10))  # no other relation drew a paper


def test_batches_depend_on_the_seed_alone_and_relations_draw_independently() -> None:
    edges = typed_edges()
    # two relations with the same edges: the same vertex must not draw the same positions from both
    edges[("paper", "cites_again", "paper")] = edges[("paper", "cites", "paper")].clone()
    graph = hetero(edges)
    seeds = torch.arange(0, PAPERS, 2)
    one = HeteroNeighborSampler(graph, [2, 2], num_threads=1).sample("paper", seeds, seed=11)
    two = HeteroNeighborSampler(graph, [2, 2], num_threads=2).sample("paper", seeds, seed=11)
    for edge_type in graph.edge_types:
        assert torch.equal(one.edge_index[edge_type], two.edge_index[edge_type])
        assert torch.equal(one.e_id[edge_type], two.e_id[edge_type])
    other = HeteroNeighborSampler(graph, [2, 2]).sample("paper", seeds, seed=12)
    assert any(not torch.equal(one.e_id[et], other.e_id[et]) for et in graph.edge_types)
    first = one.e_id[("paper", "cites", "paper")][: one.num_sampled_edges[("paper", "cites", "paper")][0]]
    again = one.e_id[("paper", "cites_again", "paper")][: one.num_sampled_edges[("paper", "cites_again", "paper")][0]]
    assert not torch.equal(first, again)


def test_zero_weight_edges_are_never_drawn() -> None:
    edges = typed_edges()
    graph = hetero(edges)
    cites = ("paper", "cites", "paper")
    weight = (torch.arange(edges[cites].shape[1]) % 2).double()  # odd edges only
    sampler = HeteroNeighborSampler(graph, [-1, 3], weights={cites: weight})
    batch = sampler.sample("paper", torch.arange(PAPERS), seed=0)
    check_edges(batch, edges)
    assert batch.e_id[cites].numel() > 0 and bool((batch.e_id[cites] % 2 == 1).all())


def test_the_samplers_maps_are_left_unclaimed_between_batches() -> None:
    edges = typed_edges()
    sampler = HeteroNeighborSampler(hetero(edges), [3, 3])
    first = sampler.sample("author", torch.tensor([1, 2]), seed=5)
    sampler.sample("paper", torch.arange(PAPERS), seed=6)
    again = sampler.sample("author", torch.tensor([1, 2]), seed=5)
    for node_type in first.n_id:
        assert torch.equal(first.n_id[node_type], again.n_id[node_type])
    assert all(bool((local == -1).all()) for local in sampler._local.values())


def test_empty_seeds_and_an_edge_type_without_edges() -> None:
    edges = typed_edges()
    edges[("venue", "none", "author")] = torch.zeros(2, 0, dtype=torch.int64)
    batch = HeteroNeighborSampler(hetero(edges), [2]).sample("paper", torch.zeros(0, dtype=torch.int64), seed=0)
    assert batch.batch_size == 0
    assert all(ids.numel() == 0 for ids in batch.n_id.values())
    assert all(index.shape == (2, 0) for index in batch.edge_index.values())


def test_bad_input_is_named() -> None:
    edges = typed_edges()
    graph = hetero(edges)
    with pytest.raises(ValueError, match="num_neighbors: edge type"):
        HeteroNeighborSampler(graph, {("paper", "nope", "paper"): [1]})
    with pytest.raises(ValueError, match="no fan-outs for edge type"):
        HeteroNeighborSampler(graph, {("paper", "cites", "paper"): [1]})
    lengths = {et: [1] for et in edges} | {("paper", "cites", "paper"): [1, 1]}
    with pytest.raises(ValueError, match="hops must be the same across all edge types"):
        HeteroNeighborSampler(graph, lengths)
    with pytest.raises(TypeError, match="graph must be a featgraph HeteroGraph"):
        HeteroNeighborSampler(graph.graph, [1])
    sampler = HeteroNeighborSampler(graph, [1])
    with pytest.raises(KeyError, match="unknown node type 'nope'"):
        sampler.sample("nope", torch.tensor([0]))
    with pytest.raises(ValueError, match="seeds holds vertex id 35, out of range for node type 'author' of 35"):
        sampler.sample("author", torch.tensor([35]))
    with pytest.raises(ValueError, match="seeds holds vertex 1 more than once"):
        sampler.sample("paper", torch.tensor([1, 1]))


def check_blocks(
    batch, edges: dict, fanouts: dict, seeds: dict, replace: bool = False, excluded: dict | None = None
) -> None:
    """DGL's typed blocks against the edges: each relation's block edges are input edges (by ``e_id``) in the
    block's local ids, each destination draws min(fan-out, its in-degree of that type) distinct edges (any
    number up to the fan-out with replacement), destinations are a prefix of each type's sources, each block's
    sources are the next block's destinations, and the last block's destinations are the seeds. ``excluded``:
    per edge type ids no block may hold, left out of the in-degrees."""
    excluded = excluded or {}
    blocks = batch.blocks
    for node_type, ids in seeds.items():
        assert torch.equal(blocks[-1].n_id[node_type][: blocks[-1].num_dst_nodes(node_type)], ids)
    for lower, upper in zip(blocks[:-1], blocks[1:], strict=True):
        for node_type in lower.node_types:
            assert torch.equal(lower.n_id[node_type][: lower.num_dst_nodes(node_type)], upper.n_id[node_type])
    for depth, block in enumerate(blocks):
        hop = len(blocks) - 1 - depth
        for node_type, ids in block.n_id.items():
            assert ids.unique().numel() == ids.numel()
            assert block.num_src_nodes(node_type) == ids.numel() >= block.num_dst_nodes(node_type)
        for edge_type, index in edges.items():
            src_type, _, dst_type = edge_type
            graph, e_id = block.relation(edge_type), block.e_id[edge_type]
            assert graph.num_src_nodes == block.num_src_nodes(src_type)
            assert graph.num_dst_nodes == block.num_dst_nodes(dst_type)
            src, dst = graph.coo()
            assert torch.equal(block.n_id[src_type][src], index[0, e_id])
            assert torch.equal(block.n_id[dst_type][dst], index[1, e_id])
            destinations = block.n_id[dst_type][: block.num_dst_nodes(dst_type)]
            kept = torch.ones(index.shape[1], dtype=torch.bool)
            kept[excluded.get(edge_type, [])] = False
            assert not bool(torch.isin(e_id, torch.as_tensor(excluded.get(edge_type, []), dtype=torch.int64)).any())
            in_degree = torch.bincount(index[1, kept], minlength=1 + int(index[1].max()) if index.numel() else 1)
            full = torch.zeros(destinations.numel(), dtype=torch.int64)
            known = destinations < in_degree.numel()
            full[known] = in_degree[destinations[known]]
            drawn = torch.bincount(dst, minlength=destinations.numel())
            fanout = fanouts[edge_type][hop]
            if replace and fanout >= 0:
                assert bool((drawn <= fanout).all()) and bool((drawn[full == 0] == 0).all())
            else:
                assert torch.equal(drawn, full if fanout < 0 else full.clamp(max=fanout))
                assert e_id.unique().numel() == e_id.numel()


@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 1, 2]], ids=["3-2", "all-1-2"])
def test_typed_blocks_are_dgls_blocks(fanouts: list[int], replace: bool) -> None:
    edges = typed_edges(skewed=True)
    graph = hetero(edges)
    seeds = {"paper": torch.tensor([3, 0, 41]), "author": torch.tensor([5])}
    batch = HeteroNeighborSampler(graph, fanouts, replace=replace).sample_blocks(seeds, seed=7)
    assert len(batch.blocks) == len(fanouts) and batch.seeds.keys() == seeds.keys()
    check_blocks(batch, edges, {et: fanouts for et in edges}, seeds, replace)
    assert batch.input_nodes is batch.blocks[0].n_id
    lonely = batch.blocks[0]
    assert lonely.num_src_nodes("lonely") == lonely.num_dst_nodes("lonely") == 0  # no edges, no seeds


@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, -1]], ids=["3-2", "all"])
def test_typed_blocks_leave_excluded_edges_out(fanouts: list[int], replace: bool) -> None:
    """``exclude_edges`` per edge type (by triple or relation name): no block holds one, and each destination
    draws among its other in-edges of the type; the seeds' own citations excluded whole."""
    edges = typed_edges(skewed=True)
    graph = hetero(edges)
    seeds = {"paper": torch.tensor([3, 0, 41]), "author": torch.tensor([5])}
    cites = ("paper", "cites", "paper")
    excluded = {
        cites: torch.isin(edges[cites][1], seeds["paper"]).nonzero().flatten(),
        ("author", "writes", "paper"): torch.arange(0, 180, 3),
    }
    given = {"cites": excluded[cites], ("author", "writes", "paper"): excluded[("author", "writes", "paper")]}
    sampler = HeteroNeighborSampler(graph, fanouts, replace=replace)
    batch = sampler.sample_blocks(seeds, seed=7, exclude_edges=given)
    check_blocks(batch, edges, {et: fanouts for et in edges}, seeds, replace, excluded)
    seed_block = batch.blocks[-1]
    assert seed_block.e_id[cites].numel() == 0  # the seeds' citations are all excluded
    with pytest.raises(TypeError, match="exclude_edges: a typed graph's edges are a dict"):
        sampler.sample_blocks(seeds, seed=7, exclude_edges=[0, 1])
    with pytest.raises(ValueError, match="exclude_edges holds edge id 999"):
        sampler.sample_blocks(seeds, seed=7, exclude_edges={"cites": [999]})


def test_typed_blocks_with_every_neighbour_are_the_k_hop_neighbourhoods() -> None:
    """With every in-edge taken, block h's sources are the vertices within h + 1 hops of the seeds (each
    layer's destinations expanded again, as DGL's blocks)."""
    edges = typed_edges(seed=1)
    seeds = torch.tensor([7, 2, 19, 50])
    batch = HeteroNeighborSampler(hetero(edges), [-1, -1, -1]).sample_blocks({"paper": seeds}, seed=0)
    for depth, block in enumerate(batch.blocks):
        reached, taken = breadth_first(edges, seeds, len(batch.blocks) - depth)
        assert {t: set(ids.tolist()) for t, ids in block.n_id.items()} == reached
        previous, _ = breadth_first(edges, seeds, len(batch.blocks) - depth - 1)
        expanded = {
            (et, e) for et, index in edges.items() for e, v in enumerate(index[1].tolist()) if v in previous[et[2]]
        }
        assert {(et, e) for et, ids in block.e_id.items() for e in ids.tolist()} == expanded


def test_typed_blocks_depend_on_the_seed_alone() -> None:
    edges = typed_edges()
    graph = hetero(edges)
    seeds = {"paper": torch.arange(0, PAPERS, 3)}
    fanouts = {et: [2, 0] if et[1] == "in" else [2, 3] for et in edges}
    one = HeteroNeighborSampler(graph, fanouts, num_threads=1).sample_blocks(seeds, seed=4)
    two = HeteroNeighborSampler(graph, fanouts, num_threads=2).sample_blocks(seeds, seed=4)
    check_blocks(one, edges, fanouts, seeds)
    for a, b in zip(one.blocks, two.blocks, strict=True):
        assert all(torch.equal(a.n_id[t], b.n_id[t]) for t in a.node_types)
        assert all(torch.equal(a.e_id[et], b.e_id[et]) for et in a.edge_types)
    assert one.blocks[0].e_id[("paper", "in", "venue")].numel() == 0  # its second hop's fan-out is 0


def test_typed_blocks_refuse_bad_seeds_by_name() -> None:
    sampler = HeteroNeighborSampler(hetero(typed_edges()), [1])
    with pytest.raises(ValueError, match="seeds: expected a dict of node type"):
        sampler.sample_blocks({})
    with pytest.raises(ValueError, match="every node type's seeds are empty"):
        sampler.sample_blocks({"paper": torch.zeros(0, dtype=torch.int64)})
    with pytest.raises(KeyError, match="unknown node type 'nope'"):
        sampler.sample_blocks({"nope": torch.tensor([0])})
    with pytest.raises(ValueError, match="out of range for node type 'venue' of 5"):
        sampler.sample_blocks({"venue": torch.tensor([5])})
    block = sampler.sample_blocks({"paper": torch.tensor([1])}, seed=0).blocks[0]
    with pytest.raises(KeyError, match="unknown node type 'nope'"):
        block.num_dst_nodes("nope")
    with pytest.raises(KeyError, match="no edge type with the relation 'nope'"):
        block.relation("nope")
    assert block.relation("cites") is block.relation(("paper", "cites", "paper"))


def test_a_pickled_sampler_gets_its_own_maps() -> None:
    """A copy in another process (a loader's worker) samples into maps of its own, never ones it shares."""
    from multiprocessing.reduction import ForkingPickler

    sampler = HeteroNeighborSampler(hetero(typed_edges()), [2, 2])
    copy = ForkingPickler.loads(ForkingPickler.dumps(sampler))
    for node_type, local in sampler._local.items():
        assert copy._local[node_type].data_ptr() != local.data_ptr() and bool((copy._local[node_type] == -1).all())
    seeds = torch.tensor([1, 4])
    one, two = sampler.sample("paper", seeds, seed=3), copy.sample("paper", seeds, seed=3)
    assert all(torch.equal(one.n_id[t], two.n_id[t]) for t in one.n_id)
