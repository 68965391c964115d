"""Mini-batches against an independent reference: blocks are the graph's edges relabelled frontier first,
counts per destination, reproducibility, PyG's flat form, awkward graphs and bad input."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from featgraph import Graph, datasets, ops
from featgraph.sampling import MiniBatch, NeighborSampler, kernel
from tests.conftest import random_edges
from tests.sampling.reference import assert_same_batch, check_minibatch, fan_graph


def skewed_graph() -> Graph:
    return datasets.rmat(11, 8, seed=5)


def some_seeds(num_nodes: int, count: int, seed: int = 0) -> torch.Tensor:
    return torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))[:count]


@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
@pytest.mark.parametrize("fanouts", [[15, 10, 5], [3, -1], [-1]], ids=["15-10-5", "3-all", "all"])
def test_blocks_are_the_graph_edges_relabelled_frontier_first(fanouts, replace):
    graph = skewed_graph()
    seeds = some_seeds(graph.num_nodes, 64)
    batch = NeighborSampler(graph, fanouts, replace=replace).sample(seeds, seed=1)
    check_minibatch(graph, batch, seeds, fanouts, replace)


@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
def test_weighted_blocks_draw_only_positive_edges(replace):
    graph = skewed_graph()
    weight = torch.rand(graph.num_edges, generator=torch.Generator().manual_seed(2))
    weight[weight < 0.3] = 0
    seeds = some_seeds(graph.num_nodes, 100)
    batch = NeighborSampler(graph, [8, 4], replace=replace, weight=weight).sample(seeds, seed=3)
    positive = torch.bincount(graph.coo()[1], weights=(weight > 0).double(), minlength=graph.num_nodes).long()
    check_minibatch(graph, batch, seeds, [8, 4], replace, available=positive)
    assert all(bool((weight[block.e_id] > 0).all()) for block in batch.blocks)


@pytest.mark.parametrize("num_nodes, num_edges", [(1, 0), (7, 0), (7, 3), (40, 200), (257, 3000)], ids=lambda v: str(v))
def test_isolated_vertices_self_loops_duplicate_edges_and_edgeless_graphs(num_nodes, num_edges):
    src, dst = random_edges(num_nodes, num_edges, seed=num_nodes)
    graph = Graph(src, dst, num_nodes)
    # the last vertex is isolated: random_edges leaves the top quarter of the ids without edges
    seeds = torch.cat([some_seeds(num_nodes - 1, num_nodes // 3), torch.tensor([num_nodes - 1])])
    for replace in (False, True):
        batch = NeighborSampler(graph, [4, 3], replace=replace).sample(seeds, seed=0)
        check_minibatch(graph, batch, seeds, [4, 3], replace)


def test_duplicate_edges_are_separate_draws_and_self_loops_keep_the_destination():
    graph = Graph(torch.tensor([1, 1, 1, 0]), torch.tensor([0, 0, 0, 0]), 2)  # 1 -> 0 three times, a loop
    block = NeighborSampler(graph, [-1]).sample([0], seed=0).blocks[0]
    assert torch.equal(block.e_id, torch.tensor([0, 1, 2, 3]))
    assert torch.equal(block.n_id, torch.tensor([0, 1]))
    assert torch.equal(block.graph.coo()[0], torch.tensor([1, 1, 1, 0]))


def test_same_seed_same_batch_other_seed_other_batch_any_thread_count():
    graph = skewed_graph()
    seeds = some_seeds(graph.num_nodes, 300)
    one = NeighborSampler(graph, [10, 5], num_threads=1).sample(seeds, seed=42)
    two = NeighborSampler(graph, [10, 5], num_threads=2)
    assert_same_batch(one, two.sample(seeds, seed=42))
    assert_same_batch(one, two.sample(seeds, seed=42))
    other = two.sample(seeds, seed=43)
    assert not torch.equal(other.blocks[-1].e_id, one.blocks[-1].e_id)


def test_seed_none_follows_torch_manual_seed():
    sampler = NeighborSampler(skewed_graph(), [5])
    torch.manual_seed(0)
    first = sampler.sample(torch.arange(100))
    torch.manual_seed(0)
    assert_same_batch(first, sampler.sample(torch.arange(100)))


def test_block_edge_weights_are_the_graph_weights_of_its_edges():
    src, dst = random_edges(60, 400, seed=1)
    graph = Graph(src, dst, 60, edge_weight=torch.rand(400, dtype=torch.float64))
    batch = NeighborSampler(graph, [5, 5]).sample(torch.arange(0, 40, 3), seed=0)
    check_minibatch(graph, batch, torch.arange(0, 40, 3), [5, 5])  # compares block.graph.edge_weight


def test_caller_tensors_are_not_modified_nor_aliased():
    graph = skewed_graph()
    seeds = some_seeds(graph.num_nodes, 50)
    weight = torch.rand(graph.num_edges)
    seeds_before, weight_before = seeds.clone(), weight.clone()
    batch = NeighborSampler(graph, [5, 5], weight=weight).sample(seeds, seed=0)
    assert torch.equal(seeds, seeds_before) and torch.equal(weight, weight_before)
    batch.seeds.add_(1)
    assert torch.equal(seeds, seeds_before)


def test_flat_form_expands_each_vertex_once_as_pyg_does():
    graph = skewed_graph()
    seeds = some_seeds(graph.num_nodes, 40)
    fanouts = [6, 4, 2]
    batch = NeighborSampler(graph, fanouts).sample(seeds, seed=9)
    flat = batch.to_edge_index()
    assert flat.batch_size == 40 and torch.equal(flat.n_id[:40], seeds)
    assert torch.equal(flat.n_id, batch.input_nodes)
    src, dst = graph.coo()
    assert torch.equal(flat.n_id[flat.edge_index[0]], src[flat.e_id])
    assert torch.equal(flat.n_id[flat.edge_index[1]], dst[flat.e_id])
    assert torch.unique(flat.e_id).numel() == flat.e_id.numel()
    # the vertex at local id i was reached at hop h when it lies between hop h-1's and hop h's frontier sizes;
    # it is expanded once, at hop h + 1 with fanouts[h + 1], and the last hop's vertices not at all
    sizes = [0] + [block.graph.num_dst_nodes for block in reversed(batch.blocks)] + [flat.n_id.numel()]
    fanout_of = torch.zeros(flat.n_id.numel(), dtype=torch.int64)
    for hop, fanout in enumerate(fanouts):
        fanout_of[sizes[hop] : sizes[hop + 1]] = fanout
    degree = graph.in_degrees()[flat.n_id]
    expected = torch.minimum(degree, fanout_of)  # 0 for the leaves
    assert torch.equal(torch.bincount(flat.edge_index[1], minlength=flat.n_id.numel()), expected)
    # a vertex's flat edges are its row in the block of the hop that expanded it
    for hop, block in enumerate(reversed(batch.blocks)):
        rows = torch.arange(sizes[hop], sizes[hop + 1])
        in_block = torch.isin(block.graph.coo()[1], rows)
        in_flat = torch.isin(flat.edge_index[1], rows)
        assert torch.equal(block.e_id[in_block], flat.e_id[in_flat])


def test_a_block_aggregates_like_its_dense_bipartite_adjacency():
    graph = skewed_graph()
    batch = NeighborSampler(graph, [6, 3]).sample(some_seeds(graph.num_nodes, 80), seed=4)
    h = torch.randn(batch.input_nodes.numel(), 8, dtype=torch.float64)
    for block in batch.blocks:
        src, dst = block.graph.coo()
        dense = torch.zeros(block.graph.num_dst_nodes, block.graph.num_src_nodes, dtype=torch.float64)
        dense.index_put_((dst, src), torch.ones(src.numel(), dtype=torch.float64), accumulate=True)
        out = ops.gspmm(block.graph, "copy_lhs", "sum", h, None)
        torch.testing.assert_close(out, dense @ h)
        h = out


def assert_grouped_as_numpy(g: Graph, dtype: torch.dtype) -> None:
    """``g``'s CSR and CSC in ``dtype`` group its COO edges as numpy's stable argsort does, each group's edges in
    id order (int64, and a sampler's own order) or, where featgraph sorted them for its kernels (int32), by
    their other endpoint, then id."""
    src, dst = (t.numpy() for t in g.coo())
    ids = np.arange(src.size)
    for name, group, other, size in (("csr", dst, src, g.num_dst_nodes), ("csc", src, dst, g.num_src_nodes)):
        built = getattr(g, name)(dtype)
        assert all(part.dtype == dtype for part in built), (name, dtype)
        orders = [np.argsort(group, kind="stable")] + (
            [np.lexsort((ids, other, group))] if dtype == torch.int32 else []
        )
        indptr = np.searchsorted(group[orders[0]], np.arange(size + 1))
        assert np.array_equal(built.indptr.numpy(), indptr), (name, dtype)
        assert any(
            np.array_equal(built.indices.numpy(), other[order]) and np.array_equal(built.edge_ids.numpy(), order)
            for order in orders
        ), (name, dtype)


@pytest.mark.parametrize("threads", [1, 3])
def test_blocks_formats_and_degrees_are_those_of_their_edges(threads):
    """Each block's CSR (int64, and the int32 one the sampler writes beside it) and CSC (built on first use)
    group its COO edges as numpy's stable argsort does, on a skewed graph with empty rows (fan-out 0 on the
    last hop) and all-neighbour hops."""
    graph = skewed_graph()
    batch = NeighborSampler(graph, [6, -1, 0], num_threads=threads).sample(some_seeds(graph.num_nodes, 80), seed=5)
    for block in batch.blocks:
        g = block.graph
        for dtype in (torch.int32, torch.int64):
            assert_grouped_as_numpy(g, dtype)
        assert torch.equal(g.in_degrees(), torch.bincount(g.coo()[1], minlength=g.num_dst_nodes))
        assert torch.equal(g.out_degrees(), torch.bincount(g.coo()[0], minlength=g.num_src_nodes))


def test_one_sampler_shared_by_threads_gives_each_call_its_own_batch():
    graph = skewed_graph()
    sampler = NeighborSampler(graph, [10, 5])
    batches = [some_seeds(graph.num_nodes, 200, seed=i) for i in range(8)]
    expected = [sampler.sample(seeds, seed=i) for i, seeds in enumerate(batches)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: sampler.sample(batches[i], seed=i), range(8)))
    for a, b in zip(expected, got, strict=True):
        assert_same_batch(a, b)


def test_minibatch_orders_blocks_input_layer_first():
    graph = skewed_graph()
    batch = NeighborSampler(graph, [3, 2]).sample(torch.arange(10), seed=0)
    assert isinstance(batch, MiniBatch)
    assert batch.blocks[-1].graph.num_dst_nodes == 10
    assert batch.blocks[0].graph.num_dst_nodes == batch.blocks[1].graph.num_src_nodes
    assert torch.equal(batch.blocks[0].n_id[: batch.blocks[1].n_id.numel()], batch.blocks[1].n_id)


# ---- bad input -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fanouts", [[-2], [1.5], [True], "15", 15, [3, None], [2**31], [2**64 + 1], [2**70], [5, 2**63]]
)
def test_bad_fanouts_are_named(fanouts):
    """Past the stated limit too: passed on, 2**64 + 1 wrapped to one draw and 2**70 to none."""
    with pytest.raises(ValueError, match="fanouts"):
        NeighborSampler(skewed_graph(), fanouts)


def test_a_zero_fanout_hop_draws_no_edges_and_keeps_its_frontier():
    graph = skewed_graph()
    seeds = some_seeds(graph.num_nodes, 20)
    batch = NeighborSampler(graph, [4, 0]).sample(seeds, seed=1)
    hop1 = batch.blocks[0]
    assert hop1.graph.num_edges == 0 and torch.equal(hop1.n_id, batch.blocks[1].n_id)
    check_minibatch(graph, batch, seeds, [4, 0])


def test_draws_with_replacement_past_what_memory_holds_are_refused_by_name(monkeypatch):
    """8 seeds x 2**31 - 1 draws (384 GiB of block arrays), and a hop just past a machine's memory: refused
    before allocating (torch's allocator error names nothing of the sampler's)."""
    graph = skewed_graph()
    seeds = graph.in_degrees().nonzero().flatten()[:8]  # with replacement each draws the full fan-out
    with pytest.raises(MemoryError, match="fanouts: hop 0 draws 2147483647 in-edges for each of 8 vertices"):
        NeighborSampler(graph, [2**31 - 1], replace=True).sample(seeds, seed=0)
    monkeypatch.setattr(kernel, "physical_memory", lambda: 24 * 8 * 50 - 1)
    with pytest.raises(MemoryError, match="8 vertices, 400 edges in all"):
        NeighborSampler(graph, [50], replace=True).sample(seeds, seed=0)
    monkeypatch.setattr(kernel, "physical_memory", lambda: 24 * 8 * 50)
    assert NeighborSampler(graph, [50], replace=True).sample(seeds, seed=0).blocks[0].graph.num_edges == 400


@pytest.mark.parametrize(("replace", "value"), [(True, 1e308), (False, 1e-310), (True, 1e-310), (False, 1e308)])
def test_equal_extreme_weights_draw_uniformly(replace, value):
    """Four equal weights near the float64 maximum, or subnormal: each edge drawn a quarter of the time
    (running sums overflowed to one edge; keys -log(u) / w were all infinite and kept the first)."""
    graph = Graph(torch.arange(4), torch.zeros(4, dtype=torch.int64), 4)
    sampler = NeighborSampler(graph, [1], replace=replace, weight=torch.full((4,), value, dtype=torch.float64))
    drawn = torch.cat([sampler.sample(torch.tensor([0]), seed=s).blocks[0].e_id for s in range(4000)])
    counts = torch.bincount(drawn, minlength=4)
    assert counts.sum() == 4000 and bool((counts - 1000).abs().max() < 5 * 1000**0.5), counts


def test_weights_spanning_the_float64_range_in_one_row_keep_their_ratios():
    """1e300 against 3e300, and a subnormal weight that is tiny beside them but still positive (kept by -1)."""
    graph = Graph(torch.arange(3), torch.zeros(3, dtype=torch.int64), 3)
    weight = torch.tensor([1e300, 3e300, 1e-315], dtype=torch.float64)
    sampler = NeighborSampler(graph, [1], replace=True, weight=weight)
    drawn = torch.cat([sampler.sample(torch.tensor([0]), seed=s).blocks[0].e_id for s in range(4000)])
    counts = torch.bincount(drawn, minlength=3)
    assert counts[2] == 0 and abs(int(counts[1]) - 3000) < 5 * (4000 * 0.75 * 0.25) ** 0.5, counts
    every = NeighborSampler(graph, [-1], weight=weight).sample(torch.tensor([0]), seed=0)
    assert sorted(every.blocks[0].e_id.tolist()) == [0, 1, 2]


@pytest.mark.parametrize(
    "seeds, error, match",
    [
        ([], ValueError, "seeds is empty"),
        ([0, 2048], ValueError, "vertex id 2048, out of range"),
        ([-1, 3], ValueError, "vertex id -1, out of range"),
        ([3, 5, 3], ValueError, "vertex 3 more than once"),
        ([[1, 2]], ValueError, "seeds must be 1-D"),
        ([1.0, 2.0], TypeError, "seeds must hold integer"),
        ([True], TypeError, "seeds must hold integer"),
    ],
)
def test_bad_seeds_are_named(seeds, error, match):
    with pytest.raises(error, match=match):
        NeighborSampler(skewed_graph(), [3]).sample(seeds, seed=0)


def test_seeds_on_a_graph_without_vertices_are_out_of_range():
    with pytest.raises(ValueError, match="out of range for a graph of 0 vertices"):
        NeighborSampler(Graph(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64), 0), [2]).sample(
            [0]
        )


@pytest.mark.parametrize(
    "weight, error, match",
    [
        (torch.ones(5), ValueError, "one entry per edge"),
        (-torch.ones(16384), ValueError, "negative"),
        (torch.full((16384,), float("nan")), ValueError, "non-finite"),
        (torch.full((16384,), float("inf")), ValueError, "non-finite"),
        (torch.ones(16384, dtype=torch.complex64), TypeError, "real numbers"),
    ],
)
def test_bad_weights_are_named(weight, error, match):
    graph = skewed_graph()
    assert graph.num_edges == 16384
    with pytest.raises(error, match=match):
        NeighborSampler(graph, [3], weight=weight)


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, True])
def test_bad_random_seed_is_named(seed):
    with pytest.raises(ValueError, match="seed must be an int"):
        NeighborSampler(skewed_graph(), [3]).sample([0], seed=seed)


def test_bad_sampler_settings_are_named():
    graph = skewed_graph()
    with pytest.raises(ValueError, match="num_threads"):
        NeighborSampler(graph, [3], num_threads=0)
    with pytest.raises(TypeError, match="replace must be a bool"):
        NeighborSampler(graph, [3], replace="yes")
    with pytest.raises(TypeError, match="featgraph Graph"):
        NeighborSampler(torch.zeros(2, 5, dtype=torch.int64), [3])
    with pytest.raises(ValueError, match="bipartite"):
        NeighborSampler(Graph(torch.tensor([0, 4]), torch.tensor([1, 0]), (5, 2)), [3])


def test_blocks_bring_their_looped_graph_as_sorting_builds_it_and_gat_on_it_equals_pyg_s():
    """``self_loops=True``: each block's ``with_self_loops()`` is built by the sampler with its CSC, both formats
    grouping the looped edges as numpy's stable argsort does; featgraph's GATConv on it gives PyG's GATConv's
    outputs, attention weights (per edge, in PyG's edge order) and gradients on the block's edge_index."""
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    from featgraph.nn import GATConv

    src, dst = random_edges(120, 900, seed=4)
    src[:60] = dst[:60]  # self loops the looped graph drops
    graph = Graph(src, dst, 120)
    batch = NeighborSampler(graph, [5, 3], self_loops=True).sample(some_seeds(120, 20), seed=2)
    torch.manual_seed(0)
    theirs, ours = pyg_nn.GATConv(6, 4, heads=2), GATConv(6, 4, heads=2)
    ours.load_state_dict(theirs.state_dict())
    for block in batch.blocks:
        g = block.graph
        assert ("with_self_loops", 1.0) in g._cache  # built with the block, not by the layer
        looped = g.with_self_loops()
        assert ("csc", g.index_dtype) in looped._cache  # so is the CSC its backward reads
        assert_grouped_as_numpy(looped, g.index_dtype)
        x = torch.randn(g.num_src_nodes, 6, requires_grad=True)
        sizes = (g.num_src_nodes, g.num_dst_nodes)
        out, (edges, alpha) = ours(x, g, return_attention_weights=True)
        out_ref, (edges_ref, alpha_ref) = theirs(
            (x, x[: g.num_dst_nodes]), g.edge_index, size=sizes, return_attention_weights=True
        )
        assert torch.equal(edges, edges_ref)
        torch.testing.assert_close(alpha, alpha_ref)
        torch.testing.assert_close(out, out_ref)
        weights = torch.randn_like(out)
        grads = torch.autograd.grad((out * weights).sum(), [x, *ours.parameters()])
        grads_ref = torch.autograd.grad((out_ref * weights).sum(), [x, *theirs.parameters()])
        for a, b in zip(grads, grads_ref, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_a_pickled_sampler_gets_its_own_map_and_the_graph_keeps_its_formats():
    """A copy in another process (a loader's worker) samples into a map of its own, never one it shares, with
    the graph's formats carried over and its other caches left behind."""
    from multiprocessing.reduction import ForkingPickler

    graph = Graph(torch.randint(0, 40, (200,)), torch.randint(0, 40, (200,)), 40)
    graph.with_self_loops()  # a derived graph in the cache, which a copy need not carry
    sampler = NeighborSampler(graph, [3, 2])
    copy = ForkingPickler.loads(ForkingPickler.dumps(sampler))
    assert copy._local.data_ptr() != sampler._local.data_ptr() and bool((copy._local == -1).all())
    assert {key[0] for key in copy.graph._cache} <= {"csr", "csc", "in_deg", "out_deg"}
    assert Graph.owning(copy.graph.edge_index, 40, 40) is copy.graph
    assert_same_batch(sampler.sample(torch.tensor([0, 5]), seed=1), copy.sample(torch.tensor([0, 5]), seed=1))


@pytest.mark.parametrize("fanouts", [[4, 3], [-1]], ids=["4-3", "all"])
@pytest.mark.parametrize("weighted", [False, True], ids=["uniform", "weighted"])
@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
def test_excluded_edges_are_never_drawn_and_their_rows_draw_among_the_rest(replace, weighted, fanouts):
    """``exclude_edges`` (DGL's): every block is what the graph without those edges gives (real edges, each
    vertex keeping what its other drawable in-edges allow, sources in order of first appearance), and no block
    holds an excluded edge; a skewed graph with duplicate edges, two seeds' rows excluded whole, a third of
    the edges excluded, zero weights."""
    graph = skewed_graph()
    gen = torch.Generator().manual_seed(3)
    seeds = some_seeds(graph.num_nodes, 120)
    src, dst = graph.coo()
    whole_rows = torch.isin(dst, seeds[:2]).nonzero().flatten()
    excluded = torch.cat([torch.randperm(graph.num_edges, generator=gen)[: graph.num_edges // 3], whole_rows])
    weight = None
    drawable = torch.ones(graph.num_edges, dtype=torch.bool)
    if weighted:
        weight = torch.rand(graph.num_edges, generator=gen, dtype=torch.float64)
        weight[torch.rand(graph.num_edges, generator=gen) < 0.2] = 0.0
        drawable = weight > 0
    drawable[excluded] = False
    available = torch.bincount(dst[drawable], minlength=graph.num_nodes)
    assert available[seeds[:2]].sum() == 0 and whole_rows.numel() > 0
    sampler = NeighborSampler(graph, fanouts, replace=replace, weight=weight)
    batch = sampler.sample(seeds, seed=1, exclude_edges=excluded.tolist())
    check_minibatch(graph, batch, seeds, fanouts, replace, available)
    for block in batch.blocks:
        assert not bool(torch.isin(block.e_id, excluded).any())


def test_rows_without_excluded_edges_draw_as_without_exclusions():
    """Only the rows holding excluded edges change: every other destination draws the same edges."""
    graph = skewed_graph()
    sampler = NeighborSampler(graph, [5])
    seeds = some_seeds(graph.num_nodes, 100)
    excluded = torch.isin(graph.coo()[1], seeds[:10]).nonzero().flatten()[::2]
    plain, cut = (sampler.sample(seeds, seed=4, exclude_edges=e).blocks[0] for e in (None, excluded))
    rows = {}
    for name, block in (("plain", plain), ("cut", cut)):
        indptr = block.graph.csr().indptr
        rows[name] = [block.e_id[indptr[i] : indptr[i + 1]].tolist() for i in range(seeds.numel())]
    touched = set(graph.coo()[1][excluded].tolist())
    for i, vertex in enumerate(seeds.tolist()):
        if vertex not in touched:
            assert rows["plain"][i] == rows["cut"][i]
    assert any(rows["plain"][i] != rows["cut"][i] for i in range(10))


@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
def test_a_row_with_excluded_edges_draws_uniformly_among_the_others(replace):
    """A fan graph of 3000 identical rows of 6 edges, positions 0 and 3 excluded: 2 draws a row fall on each of
    the other 4 positions equally often (chi-square against uniform)."""
    stats = pytest.importorskip("scipy.stats")
    num_dst, degree = 3000, 6
    graph = fan_graph(num_dst, degree)
    excluded = torch.cat([torch.arange(num_dst) * degree, torch.arange(num_dst) * degree + 3])
    block = NeighborSampler(graph, [2], replace=replace).sample(torch.arange(num_dst), 7, excluded).blocks[0]
    positions = (block.e_id % degree).numpy()
    counts = np.bincount(positions, minlength=degree)
    assert counts[0] == 0 and counts[3] == 0 and counts.sum() == 2 * num_dst
    assert stats.chisquare(counts[[1, 2, 4, 5]]).pvalue > 1e-4


@pytest.mark.parametrize(
    ("exclude", "error", "match"),
    [
        ([0, 10**6], ValueError, "exclude_edges holds edge id 1000000, out of range"),
        ([-1], ValueError, "exclude_edges holds edge id -1"),
        ([0.5], TypeError, "exclude_edges must hold integer edge ids"),
        ([[0, 1]], ValueError, "exclude_edges must be 1-D"),
    ],
)
def test_bad_excluded_edges_are_named(exclude, error, match):
    graph = skewed_graph()
    with pytest.raises(error, match=match):
        NeighborSampler(graph, [3]).sample([0, 1], seed=0, exclude_edges=exclude)
