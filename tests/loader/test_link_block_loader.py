"""LinkBlockLoader against the full graph: DGL's (input_nodes, pair_graph, neg_pair_graph, blocks) batches whose
pair graphs map back to the seed edges and to per-source uniform negatives, blocks checked by the sampler's
reference, every edge once an epoch, scores on the pair graphs equal to the dense dot products, and bad input
named."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph, ops
from featgraph.loader import LinkBlockBatch, LinkBlockLoader
from featgraph.sampling import GlobalUniformNegatives, MiniBatch, PairGraph
from tests.sampling.reference import check_minibatch


def skewed_graph(seed: int = 0) -> Graph:
    """A hub with most in-edges, duplicate edges, self loops and isolated vertices."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 60, (400,), generator=gen)
    dst = torch.where(torch.rand(400, generator=gen) < 0.3, 0, torch.randint(0, 55, (400,), generator=gen))
    src = torch.cat([src, src[:20], torch.arange(5)])
    dst = torch.cat([dst, dst[:20], torch.arange(5)])
    return Graph(src, dst, 64)


@pytest.mark.parametrize("negatives", [None, 1, 3])
def test_batches_are_dgls_edge_prediction_layout(negatives):
    graph = skewed_graph()
    x = torch.randn(64, 7)
    edge_ids = torch.arange(0, graph.num_edges, 3)
    loader = LinkBlockLoader(graph, [4, 3], 25, edge_ids=edge_ids, negatives=negatives, seed=2, x=x)
    src_all, dst_all = graph.coo()
    seen = []
    for batch in loader:
        assert isinstance(batch, LinkBlockBatch)
        parts = tuple(batch)
        assert len(parts) == (3 if negatives is None else 4)
        input_nodes, pair_graph, blocks = parts[0], parts[1], parts[-1]
        assert torch.equal(batch.edge_ids, edge_ids[batch.input_id])
        seeds = batch.seeds
        p_src, p_dst = pair_graph.coo()
        assert torch.equal(seeds[p_src], src_all[batch.edge_ids]) and torch.equal(seeds[p_dst], dst_all[batch.edge_ids])
        ends = [src_all[batch.edge_ids], dst_all[batch.edge_ids]]
        if negatives:
            n_src, n_dst = batch.neg_pair_graph.coo()
            assert n_src.numel() == negatives * batch.batch_size
            assert torch.equal(seeds[n_src], src_all[batch.edge_ids].repeat_interleave(negatives))
            ends.append(seeds[n_dst])
        assert torch.equal(seeds, torch.unique(torch.cat(ends)))
        assert pair_graph.num_nodes == seeds.numel()
        check_minibatch(graph, MiniBatch(blocks, seeds), seeds, [4, 3])
        assert torch.equal(input_nodes, blocks[0].n_id) and torch.equal(batch.x, x[input_nodes])
        seen += batch.edge_ids.tolist()
    assert sorted(seen) == edge_ids.tolist()


def test_scores_on_the_pair_graphs_are_the_dot_products_of_the_pairs():
    """A two-layer mean model on the blocks, then u_dot_v on each pair graph: the dense dot products of the
    pairs' embeddings, forward and backward."""
    graph = skewed_graph(1)
    x = torch.randn(64, 6, dtype=torch.float64)
    batch = next(iter(LinkBlockLoader(graph, [-1, 3], 40, negatives=2, seed=0, x=x)))
    weights = [torch.randn(6, 6, dtype=torch.float64, requires_grad=True) for _ in batch.blocks]
    h = batch.x
    for block, w in zip(batch.blocks, weights, strict=True):
        h = torch.tanh(ops.copy_u_mean(block.graph, h) @ w + h[: block.graph.num_dst_nodes])
    scores = [ops.u_dot_v(g, h, h).squeeze(-1) for g in (batch.pair_graph, batch.neg_pair_graph)]
    dense = [(h[g.coo()[0]] * h[g.coo()[1]]).sum(-1) for g in (batch.pair_graph, batch.neg_pair_graph)]
    for ours, theirs in zip(scores, dense, strict=True):
        torch.testing.assert_close(ours, theirs)
    grads = torch.autograd.grad(sum(s.square().sum() for s in scores), weights, retain_graph=True)
    expected = torch.autograd.grad(sum(d.square().sum() for d in dense), weights)
    for a, b in zip(grads, expected, strict=True):
        torch.testing.assert_close(a, b)


def test_batches_depend_on_the_seed_and_take_dgls_uniform_sampler():
    class Uniform:  # DGL's negative_sampler.Uniform, read by its name and k
        def __init__(self, k: int) -> None:
            self.k = k

    graph = skewed_graph(2)
    one = list(LinkBlockLoader(graph, [3], 50, negatives=Uniform(2), seed=5))
    two = list(LinkBlockLoader(graph, [3], 50, negatives=2, seed=5, prefetch=0))
    for a, b in zip(one, two, strict=True):
        assert torch.equal(a.edge_ids, b.edge_ids) and torch.equal(a.input_nodes, b.input_nodes)
        assert torch.equal(torch.stack(a.neg_pair_graph.coo()), torch.stack(b.neg_pair_graph.coo()))
    other = list(LinkBlockLoader(graph, [3], 50, negatives=2, seed=6))
    assert any(not torch.equal(a.edge_ids, b.edge_ids) for a, b in zip(one, other, strict=True))


def test_bad_input_is_named():
    graph = skewed_graph()

    class GlobalUniform:
        k = 1

    with pytest.raises(
        ValueError, match="exclude must be None, 'self', 'reverse_id' or a callable, got 'reverse_types'"
    ):
        LinkBlockLoader(graph, [2], exclude="reverse_types")
    with pytest.raises(ValueError, match="exclude='reverse_id' needs reverse_eids"):
        LinkBlockLoader(graph, [2], exclude="reverse_id")
    with pytest.raises(ValueError, match="reverse_eids is only read with exclude='reverse_id', got exclude='self'"):
        LinkBlockLoader(graph, [2], exclude="self", reverse_eids=torch.arange(graph.num_edges))
    with pytest.raises(ValueError, match="reverse_eids must hold a reverse edge id for each of the 425 edges"):
        LinkBlockLoader(graph, [2], exclude="reverse_id", reverse_eids=torch.arange(3))
    with pytest.raises(ValueError, match="reverse_eids holds edge id -1"):
        LinkBlockLoader(graph, [2], exclude="reverse_id", reverse_eids=torch.arange(graph.num_edges) - 1)
    with pytest.raises(TypeError, match="negatives: expected None, an int, DGL's negative_sampler.Uniform"):
        LinkBlockLoader(graph, [2], negatives=GlobalUniform())
    with pytest.raises(ValueError, match="negatives"):
        LinkBlockLoader(graph, [2], negatives=0)
    with pytest.raises(ValueError, match=f"edge_ids holds edge id {graph.num_edges}, out of range"):
        LinkBlockLoader(graph, [2], edge_ids=[0, graph.num_edges])
    with pytest.raises(TypeError, match="edge_ids must hold integer edge ids"):
        LinkBlockLoader(graph, [2], edge_ids=torch.tensor([0.5]))
    with pytest.raises(ValueError, match="edge_ids is empty"):
        LinkBlockLoader(graph, [2], edge_ids=torch.zeros(0, dtype=torch.int64))


def test_a_typed_graph_gets_typed_edge_prediction_batches():
    """On a HeteroData: per seed edge type a pair graph between its two types' seeds mapping back to the seed
    edges, per-source uniform negatives of the destination type, typed blocks ending on the seeds, features
    sliced per type, every seed edge once an epoch."""
    pytest.importorskip("torch_geometric")
    from featgraph.loader import HeteroLinkBlockBatch, HeteroLinkBlockLoader
    from tests.loader.test_hetero_loader import hetero_data

    data = hetero_data()
    writes, cites = ("author", "writes", "paper"), ("paper", "cites", "paper")
    edge_ids = {writes: torch.arange(0, 150, 2), "cites": None}
    loader = LinkBlockLoader(data, [3, 2], 40, edge_ids=edge_ids, negatives=2, seed=1)
    assert isinstance(loader, HeteroLinkBlockLoader)
    seen = {writes: [], cites: []}
    for batch in loader:
        assert isinstance(batch, HeteroLinkBlockBatch)
        input_nodes, pair_graph, neg_pair_graph, blocks = batch
        for node_type, ids in batch.seeds.items():
            assert torch.equal(blocks[-1].n_id[node_type][: blocks[-1].num_dst_nodes(node_type)], ids)
        for edge_type, graph in pair_graph.items():
            src_type, _, dst_type = edge_type
            ids = batch.edge_ids[edge_type]
            src, dst = graph.coo()
            original = data[edge_type].edge_index[:, ids]
            assert torch.equal(batch.seeds[src_type][src], original[0])
            assert torch.equal(batch.seeds[dst_type][dst], original[1])
            n_src, n_dst = neg_pair_graph[edge_type].coo()
            assert torch.equal(batch.seeds[src_type][n_src], original[0].repeat_interleave(2))
            assert n_dst.numel() == 2 * ids.numel()
            assert int(batch.seeds[dst_type][n_dst].max()) < data[dst_type].num_nodes
            seen[edge_type] += ids.tolist()
        assert torch.equal(batch.x["paper"], data["paper"].x[input_nodes["paper"]])
    assert sorted(seen[writes]) == list(range(0, 150, 2))
    assert sorted(seen[cites]) == list(range(data[cites].num_edges))
    with pytest.raises(TypeError, match="edge_ids: a typed graph's seed edges are a non-empty dict"):
        LinkBlockLoader(data, [2], edge_ids=None)
    with pytest.raises(KeyError, match="no edge type with the relation 'nope'"):
        LinkBlockLoader(data, [2], edge_ids={"nope": None})
    with pytest.raises(ValueError, match="exclude='reverse_types' needs reverse_etypes"):
        LinkBlockLoader(data, [2], edge_ids={"cites": None}, exclude="reverse_types")
    with pytest.raises(ValueError, match="reverse_etypes: .* has 314 edges and its reverse"):
        LinkBlockLoader(
            data, [2], edge_ids={"cites": None}, exclude="reverse_types", reverse_etypes={"cites": "writes"}
        )


def symmetric_graph() -> tuple[Graph, torch.Tensor]:
    """``skewed_graph``'s edges and their reverses (edge ``e``'s reverse is ``e + E / 2`` and back)."""
    src, dst = skewed_graph(3).coo()
    half = src.numel()
    return Graph(torch.cat([src, dst]), torch.cat([dst, src]), 64), (torch.arange(2 * half) + half) % (2 * half)


@pytest.mark.parametrize("exclude", ["self", "reverse_id", "callable"])
def test_exclude_leaves_the_batch_edges_out_of_its_neighbourhoods(exclude):
    """DGL's ``exclude``: no block of a batch holds its positives (and with ``"reverse_id"`` their reverses, with
    a callable what it returns), and every vertex draws among its other in-edges (all of them at the seeds'
    hop), as from the graph without them; without ``exclude`` the same batches do hold some of them."""
    graph, reverse = symmetric_graph()
    drop = {"self": lambda ids: ids, "reverse_id": lambda ids: torch.cat([ids, reverse[ids]])}
    drop["callable"] = lambda ids: torch.cat([ids, reverse[ids]])[::2]
    given = {"self": {"exclude": "self"}, "reverse_id": {"exclude": "reverse_id", "reverse_eids": reverse}}
    given["callable"] = {"exclude": drop["callable"]}
    edge_ids = torch.arange(0, graph.num_edges, 2)
    options = {"edge_ids": edge_ids, "negatives": 1, "seed": 4}
    loader = LinkBlockLoader(graph, [-1, 3], 30, **options, **given[exclude])
    plain = LinkBlockLoader(graph, [-1, 3], 30, **options)
    dst = graph.coo()[1]
    held = 0
    for batch, unexcluded in zip(loader, plain, strict=True):
        excluded = drop[exclude](batch.edge_ids)
        kept = torch.ones(graph.num_edges, dtype=torch.bool)
        kept[excluded] = False
        available = torch.bincount(dst[kept], minlength=graph.num_nodes)
        check_minibatch(graph, MiniBatch(batch.blocks, batch.seeds), batch.seeds, [-1, 3], available=available)
        for block in batch.blocks:
            assert not bool(torch.isin(block.e_id, excluded).any())
        held += sum(int(torch.isin(block.e_id, excluded).sum()) for block in unexcluded.blocks)
    assert held > 0
    if exclude == "reverse_id":  # a named mode travels to worker processes (the callable here would not pickle)
        in_workers = LinkBlockLoader(graph, [-1, 3], 30, **options, **given[exclude], worker_processes=1)
        in_thread = LinkBlockLoader(graph, [-1, 3], 30, **options, **given[exclude])
        for ours, theirs in zip(in_workers, in_thread, strict=True):
            assert all(torch.equal(a.e_id, b.e_id) for a, b in zip(ours.blocks, theirs.blocks, strict=True))


def test_typed_exclude_leaves_seed_edges_and_their_reverse_types_out():
    """``exclude="reverse_types"``: a batch's ``writes`` edges and the same ids of ``rev_writes`` are in no
    block; ``"self"`` leaves only the seed edges out; a map of the wrong mode is refused by name."""
    pytest.importorskip("torch_geometric")
    from tests.loader.test_hetero_loader import hetero_data

    data = hetero_data()
    writes, rev_writes = ("author", "writes", "paper"), ("paper", "rev_writes", "author")
    for exclude, extra in (("reverse_types", {"reverse_etypes": {"writes": "rev_writes"}}), ("self", {})):
        loader = LinkBlockLoader(data, [-1, 2], 30, edge_ids={writes: None}, exclude=exclude, seed=2, **extra)
        reversed_held = 0
        for batch in loader:
            ids = batch.edge_ids[writes]
            for block in batch.blocks:
                assert not bool(torch.isin(block.e_id[writes], ids).any())
                reversed_held += int(torch.isin(block.e_id[rev_writes], ids).sum())
        assert (reversed_held == 0) == (exclude == "reverse_types")
    with pytest.raises(ValueError, match="reverse_etypes is only read with exclude='reverse_types'"):
        LinkBlockLoader(data, [2], edge_ids={writes: None}, reverse_etypes={"writes": "rev_writes"})


def test_a_batch_moved_to_the_gpu_target_scores_its_pairs(gpu):
    """``batch.to(device)`` moves the pair graphs and blocks; scores through the GPU target (CUDA, or Triton's
    interpreter) equal the dense dot products."""
    import featgraph as fg

    graph = skewed_graph(3)
    x = torch.randn(64, 8)
    batch = next(iter(LinkBlockLoader(graph, [2], 30, negatives=1, seed=0, x=x))).to(gpu)
    assert batch.x.device == batch.pair_graph.edge_index.device == batch.blocks[0].graph.edge_index.device == gpu
    h = batch.x[: batch.blocks[0].graph.num_dst_nodes]
    with fg.default_target("gpu"):
        scores = [ops.u_dot_v(g, h, h).squeeze(-1) for g in (batch.pair_graph, batch.neg_pair_graph)]
    for g, got in zip((batch.pair_graph, batch.neg_pair_graph), scores, strict=True):
        src, dst = g.coo()
        torch.testing.assert_close(got.cpu(), (h[src] * h[dst]).sum(-1).cpu())


@settings(max_examples=30, deadline=None)
@given(
    num_nodes=st.integers(2, 25),
    edges=st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), min_size=1, max_size=80),
    fanouts=st.lists(st.sampled_from([-1, 1, 3]), min_size=1, max_size=2),
    negatives=st.sampled_from([None, 1, 2]),
    exclude=st.sampled_from([None, "self"]),
    batch_size=st.integers(1, 9),
)
def test_property_every_sampled_edge_is_real_excluded_ones_absent_and_pairs_aligned(
    num_nodes, edges, fanouts, negatives, exclude, batch_size
):
    """Against the graph itself: every block edge is a real edge named by its id, an excluded edge is in no
    block, each positive pair is its edge id's endpoints, each negative keeps its positive's source, and an
    epoch visits every edge once."""
    pairs = [(u % num_nodes, v % num_nodes) for u, v in edges]  # duplicates, self loops, isolated vertices
    src = torch.tensor([u for u, _ in pairs])
    dst = torch.tensor([v for _, v in pairs])
    graph = Graph(src, dst, num_nodes)
    loader = LinkBlockLoader(graph, fanouts, batch_size, negatives=negatives, exclude=exclude, seed=1)
    visited = []
    for batch in loader:
        visited.append(batch.edge_ids)
        for block in batch.blocks:
            b_src, b_dst = block.graph.coo()
            assert torch.equal(src[block.e_id], block.n_id[b_src]) and torch.equal(dst[block.e_id], block.n_id[b_dst])
            if exclude == "self":
                assert not bool(torch.isin(block.e_id, batch.edge_ids).any())
        p_src, p_dst = batch.pair_graph.coo()
        assert torch.equal(batch.seeds[p_src], src[batch.edge_ids]) and torch.equal(
            batch.seeds[p_dst], dst[batch.edge_ids]
        )
        assert torch.equal(batch.blocks[-1].n_id[: batch.blocks[-1].graph.num_dst_nodes], batch.seeds)
        if negatives:
            n_src, n_dst = batch.neg_pair_graph.coo()
            assert torch.equal(batch.seeds[n_src], src[batch.edge_ids].repeat_interleave(negatives))
            assert bool((batch.seeds[n_dst] < num_nodes).all())
        else:
            assert batch.neg_pair_graph is None
    assert torch.equal(torch.cat(visited).sort().values, torch.arange(len(pairs)))


@settings(max_examples=25, deadline=None)
@given(
    num_nodes=st.integers(1, 12),
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=1, max_size=40),
    k=st.integers(1, 4),
    exclude_self_loops=st.booleans(),
    replace=st.booleans(),
)
def test_property_global_negatives_are_pairs_that_are_not_edges(num_nodes, edges, k, exclude_self_loops, replace):
    """DGL's ``GlobalUniform`` negatives against the graph's own edge set: no negative is an edge, none a self loop
    where those are excluded, none repeated without replacement, at most ``k`` per positive; pair graphs carry DGL's
    ``num_nodes()``, ``edges()``, ``ndata[dgl.NID]`` and ``edata[dgl.EID]``."""
    pairs = {(u % num_nodes, v % num_nodes) for u, v in edges}
    src, dst = (torch.tensor(side) for side in zip(*sorted(pairs), strict=True))
    graph = Graph(src, dst, num_nodes)
    negatives = GlobalUniformNegatives(k, exclude_self_loops, replace)
    for batch in LinkBlockLoader(graph, [1], 5, negatives=negatives, seed=2, idtype=torch.int32):
        pair_graph, neg_pair_graph = batch.pair_graph, batch.neg_pair_graph
        assert (
            isinstance(pair_graph, PairGraph) and pair_graph.num_nodes() == pair_graph.num_nodes == batch.seeds.numel()
        )
        assert pair_graph.idtype == torch.int32 and torch.equal(pair_graph.edata["_ID"], batch.edge_ids.int())
        u, v = pair_graph.edges()
        seeds = pair_graph.ndata["_ID"].long()
        assert torch.equal(seeds[u], src[batch.edge_ids]) and torch.equal(seeds[v], dst[batch.edge_ids])
        n_u, n_v = (seeds[end] for end in neg_pair_graph.edges())
        drawn = list(zip(n_u.tolist(), n_v.tolist(), strict=True))
        assert neg_pair_graph.num_edges() <= k * batch.edge_ids.numel() and "_ID" not in neg_pair_graph.edata
        assert not set(drawn) & pairs
        assert not exclude_self_loops or all(a != b for a, b in drawn)
        assert replace or len(set(drawn)) == len(drawn)


def test_dgls_lenient_reverse_ids_and_maps_beside_a_callable_are_accepted():
    """As DGL's: a ``reverse_eids`` longer than the edges is read up to them, a reverse id naming no edge excludes
    nothing (the batch's own edges are still left out), and a callable ``exclude`` leaves ``reverse_eids``
    unread; a callable's ids past the edges exclude nothing either."""
    graph = skewed_graph()
    count = graph.num_edges
    reverse = torch.cat([torch.arange(count, 2 * count), torch.arange(count)])  # every reverse names no edge
    loader = LinkBlockLoader(graph, [-1], 50, exclude="reverse_id", reverse_eids=reverse, seed=0)
    for batch in loader:
        assert not bool(torch.isin(batch.blocks[0].e_id, batch.edge_ids).any())
    beyond = LinkBlockLoader(graph, [-1], 50, exclude=lambda ids: torch.cat([ids, ids + count]), reverse_eids=reverse)
    for batch in beyond:
        assert not bool(torch.isin(batch.blocks[0].e_id, batch.edge_ids).any())


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: GlobalUniformNegatives(0), ValueError, "k must be an int >= 1"),
        (lambda: GlobalUniformNegatives(2, replace=3), TypeError, "replace must be a bool"),
        (lambda: GlobalUniformNegatives(2, exclude_self_loops=None), TypeError, "exclude_self_loops must be a bool"),
    ],
)
def test_bad_global_negatives_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()
